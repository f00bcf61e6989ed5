package message

import (
	"bytes"
	"slices"
	"time"
)

// Kind says what a message carries. The kind decides which kind properties are
// encoded on the wire.
type Kind uint8

// The three kinds of message.
const (
	KindCommand Kind = 1
	KindData    Kind = 2
	KindFile    Kind = 3
)

// Priority bounds. 9 is the most urgent.
const (
	MinPriority     = 0
	MaxPriority     = 9
	DefaultPriority = 4
)

// CommandProps are the kind properties of a command message.
type CommandProps struct {
	Command       string
	ReplyTo       string
	CorrelationID string
}

// DataProps are the kind properties of a data message.
type DataProps struct {
	DataType string
	Encoding string
}

// FileProps are the kind properties of a file message.
type FileProps struct {
	SrcIdentifier    string
	CenterIdentifier string
	DestIdentifier   string
	Filename         string
	Filesize         int64
	FileChecksum     string // SHA-256, lowercase hex
	SendFilePath     string
	ReceivedFilePath string
}

// Message is the unit Petrel stores and forwards.
//
// Only the kind properties that match Kind are encoded; the others are ignored
// by the codec and come back zero after a round trip.
type Message struct {
	// Header.
	ID          uint64        // unique per origin node, ordered by time
	Origin      NodeID        // unique id of the node that created the message
	Destination string        // "name@node", or a bare "name" for the local node
	Kind        Kind          // command, data or file
	Priority    uint8         // 0–9, 9 most urgent
	TTL         time.Duration // remaining time to live; 0 never expires
	Timestamp   time.Time     // creation time

	// Kind properties.
	Command CommandProps
	Data    DataProps
	File    FileProps

	// Application properties, in insertion order, keys unique.
	Properties Properties

	Body []byte
}

// Clone returns a deep copy of m: changing the copy's Body or Properties
// never shows in m. Strings and Values are immutable, so the copy shares
// them.
//
// A message with few properties gets them in the same allocation as the
// copy, as Decode does: a node's consumers clone one decoded message per
// copy of a topic's publish.
func (m *Message) Clone() *Message {
	var c *Message
	if n := len(m.Properties); n > 0 && n <= inlineProps {
		mp := new(messageWithProps)
		mp.m = *m
		c = &mp.m
		c.Properties = append(mp.p[:0:n], m.Properties...)
	} else {
		c = new(Message)
		*c = *m
		c.Properties = slices.Clone(m.Properties)
	}
	c.Body = bytes.Clone(m.Body)
	return c
}

// CopyTo sets *c to a deep copy of m, as Clone makes, for a caller that
// allocates c together with something else.
func (m *Message) CopyTo(c *Message) {
	*c = *m
	c.Properties = slices.Clone(m.Properties)
	c.Body = bytes.Clone(m.Body)
}
