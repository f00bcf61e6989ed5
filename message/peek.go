package message

import (
	"fmt"
	"strings"
)

// Peek checks data as Decode does (every length against the input and lim,
// kinds, types, flags, duplicate keys, no trailing bytes) and checks the
// destination's syntax, but builds only the header: the returned Message
// has ID, Origin, Destination, Kind, Priority, TTL and Timestamp set, and
// no kind properties, properties or body. It allocates the Message and the
// destination string, nothing else, and does not retain data.
//
// A node that stores and forwards a message it received uses Peek: it
// needs the header to route, order, expire and dedupe the message, and
// keeps the bytes as they came.
func Peek(data []byte, lim Limits) (*Message, error) {
	var probe Message // views of data: copy what leaves
	if _, err := scanInto(data, lim, &probe); err != nil {
		return nil, err
	}
	dest := probe.Destination
	if _, _, err := ParseDestination(dest); err != nil {
		return nil, fmt.Errorf("destination: %w", err)
	}
	return &Message{
		ID: probe.ID, Origin: probe.Origin, Destination: strings.Clone(dest),
		Kind: probe.Kind, Priority: probe.Priority, TTL: probe.TTL, Timestamp: probe.Timestamp,
	}, nil
}
