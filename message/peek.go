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
	return peek(data, lim, false)
}

// PeekValid is Peek for a message that arrives from the network to be
// stored: it also refuses what Validate refuses and the codec can carry,
// a negative TTL and a property key that is empty or not UTF-8, so that
// a peer that builds its messages by hand cannot store what the node's
// own Producer refuses. Peek itself stays as lenient as Decode: messages
// stored before these checks must still be read.
func PeekValid(data []byte, lim Limits) (*Message, error) {
	return peek(data, lim, true)
}

func peek(data []byte, lim Limits, strict bool) (*Message, error) {
	var probe Message // views of data: copy what leaves
	r := reader{in: data, lim: lim.effective(), strict: strict}
	r.message(&probe)
	if err := r.err; err != nil {
		return nil, err
	}
	if strict && probe.TTL < 0 {
		return nil, fmt.Errorf("ttl %v: negative: %w", probe.TTL, ErrTTL)
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
