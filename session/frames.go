package session

import (
	"encoding/binary"
	"fmt"
	"io"
)

// Frame header, 10 bytes. All integers are big-endian.
//
//	offset  field    type    notes
//	[0]     type     uint8   Type
//	[1]     flags    uint8   per type; reserved bits must be 0
//	[2]     session  uint32  0 = the connection itself
//	[6]     length   uint32  payload bytes that follow
//	[10]    payload  length bytes: the packet of this type
//
// The payload length is checked against a limit before anything of that
// size is allocated: MaxFrame after the handshake, preAuthMaxFrame before it,
// controlMaxFrame for every type but Data. So a hostile length (a TLS record
// or an HTTP request read as a header) costs nothing.
const HeaderLen = 10

// Type says which packet a frame carries.
type Type uint8

// Frame types. The numbers are part of the wire format.
const (
	TypeHello                 Type = 1  // server -> client, session 0: versions, server nonce, server name and id
	TypeAuth                  Type = 2  // client -> server, session 0: chosen version, client name/id/nonce, MAC
	TypeAuthOK                Type = 3  // server -> client, session 0: server MAC
	TypeError                 Type = 4  // either way; session 0 = connection-level (connection then closes), else session-level
	TypeSessionCreate         Type = 10 // client -> server: open a session for an address
	TypeSessionCreateResponse Type = 11 // server -> client: accepted with a version and window, or refused
	TypeData                  Type = 12 // sender -> receiver: a sequence number and an encoded message
	TypeDataAck               Type = 13 // receiver -> sender: every seq up to this one is durable
	TypeRefuse                Type = 14 // receiver -> sender: this seq will never be stored, with the reason
	TypeSessionClose          Type = 15 // either way: end the session in order
	TypeSessionCloseResponse  Type = 16 // either way: the session is freed
	TypePing                  Type = 17 // either way, session 0: liveness
	TypePong                  Type = 18 // either way, session 0: answer to a Ping
	TypeDeliver               Type = 19 // server -> client, subscribe session: one leased message
	TypeCredit                Type = 20 // client -> server, subscribe session: more deliveries allowed
	TypeSettle                Type = 21 // client -> server, subscribe session: ack, nack or release
)

// FlagNoCommonVersion is set on a SessionCreateResponse that refuses a
// session because none of the offered versions is supported, so that Open
// can return ErrVersion rather than ErrRefused.
const FlagNoCommonVersion uint8 = 1 << 0

// FlagFile is set on a SessionCreate that opens a file session: one that
// carries one file's announcement and content instead of a queue's
// messages (see Conn.OpenFile). Every flag bit not defined for a type
// must be 0.
const FlagFile uint8 = 1 << 1

// FlagPublish is set on a SessionCreate that opens a publish session: a
// client that is not a node sends messages for the server to route as its
// own producer would.
const FlagPublish uint8 = 1 << 2

// FlagSubscribe is set on a SessionCreate that opens a subscribe session:
// the server pushes deliveries from the address's receive queue.
const FlagSubscribe uint8 = 1 << 3

// FlagTopic is set, with FlagSubscribe, on a SessionCreate that subscribes
// to a topic pattern: its address is the pattern, and its payload carries
// the subscription's name and durability (see SessionCreate).
const FlagTopic uint8 = 1 << 4

// FlagDenied is set on a SessionCreateResponse that refuses a session by
// an access rule, so that Open can return ErrDenied, and on a Refuse of a
// packet the access rules deny (Ack.Denied).
const FlagDenied uint8 = 1 << 1

// FileAbortSeq is the sequence number of the Data packet by which the
// sender of a file session gives the file up; the payload is the reason,
// and the receiver frees what it holds of the file.
const FileAbortSeq = ^uint64(0)

// FileChecksumSeq is the sequence number of the Data packet that carries
// the SHA-256 of a file announced without one (its checksum follows): the
// sender sends it after the file's last byte, once it has the checksum,
// and the receiver verifies the file against it before it takes custody.
// The payload is the checksum as 64 lowercase hex digits (see
// ParseFileChecksum). It is one below FileAbortSeq, so that neither can be
// the end offset of a chunk of any file a filesystem holds.
const FileChecksumSeq = FileAbortSeq - 1

// FileChecksumLen is the length of a FileChecksumSeq packet's payload.
const FileChecksumLen = 64

// AppendFileChecksum appends the payload of a FileChecksumSeq packet: sum,
// which must be 64 lowercase hex digits (ParseFileChecksum checks it on
// the other side).
func AppendFileChecksum(dst []byte, sum string) []byte { return append(dst, sum...) }

// ParseFileChecksum returns the checksum a FileChecksumSeq packet carries.
// Anything but exactly 64 lowercase hex digits is an error wrapping
// ErrMalformed: the one spelling keeps the checksum comparable as a string
// at every hop, and the message that stores it valid.
func ParseFileChecksum(p []byte) (string, error) {
	if len(p) != FileChecksumLen {
		return "", fmt.Errorf("file checksum of %d bytes, not %d hex digits: %w", len(p), FileChecksumLen, ErrMalformed)
	}
	for i, c := range p {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return "", fmt.Errorf("file checksum byte %d is %q, not a lowercase hex digit: %w", i, c, ErrMalformed)
		}
	}
	return string(p), nil
}

// Limits on payload length besides Config.MaxFrame.
const (
	// preAuthMaxFrame bounds every frame before authentication completes,
	// so that an unauthenticated peer cannot make a node allocate more.
	preAuthMaxFrame = 4 << 10
	// controlMaxFrame bounds every frame but Data. The largest control
	// packet, a SessionCreate with FlagTopic, holds at most 255 versions,
	// three str16 strings and the options byte:
	// 20 + 1 + 510 + 3×(2+65535) + 1 bytes.
	controlMaxFrame = 20 + 1 + 2*255 + 3*(2+65535) + 1
)

var be = binary.BigEndian

var typeNames = [...]string{
	TypeHello:                 "Hello",
	TypeAuth:                  "Auth",
	TypeAuthOK:                "AuthOK",
	TypeError:                 "Error",
	TypeSessionCreate:         "SessionCreate",
	TypeSessionCreateResponse: "SessionCreateResponse",
	TypeData:                  "Data",
	TypeDataAck:               "DataAck",
	TypeRefuse:                "Refuse",
	TypeSessionClose:          "SessionClose",
	TypeSessionCloseResponse:  "SessionCloseResponse",
	TypePing:                  "Ping",
	TypePong:                  "Pong",
	TypeDeliver:               "Deliver",
	TypeCredit:                "Credit",
	TypeSettle:                "Settle",
}

// String returns the packet name, or Type(n) for an unknown type.
func (t Type) String() string {
	if t.Known() {
		return typeNames[t]
	}
	return fmt.Sprintf("Type(%d)", uint8(t))
}

// Known reports whether t is a type this version of the protocol defines.
func (t Type) Known() bool {
	return int(t) < len(typeNames) && typeNames[t] != ""
}

// allowedFlags returns the flag bits that a frame of type t may carry.
func (t Type) allowedFlags() uint8 {
	switch t {
	case TypeSessionCreateResponse:
		return FlagNoCommonVersion | FlagDenied
	case TypeSessionCreate:
		return FlagFile | FlagPublish | FlagSubscribe | FlagTopic
	case TypeRefuse:
		return FlagDenied
	}
	return 0
}

// Header is the fixed part of every frame.
type Header struct {
	Type    Type
	Flags   uint8
	Session uint32
	Length  uint32 // payload bytes after the header
}

// AppendHeader appends the HeaderLen bytes of h to dst.
func AppendHeader(dst []byte, h Header) []byte {
	dst = append(dst, byte(h.Type), h.Flags)
	dst = be.AppendUint32(dst, h.Session)
	return be.AppendUint32(dst, h.Length)
}

// ParseHeader reads a header from the first HeaderLen bytes of b. It checks
// nothing but the size of b: whether the type is known, the flags allowed
// and the length acceptable is the caller's decision.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderLen {
		return Header{}, fmt.Errorf("frame header: %d bytes, want %d: %w", len(b), HeaderLen, ErrMalformed)
	}
	return Header{
		Type:    Type(b[0]),
		Flags:   b[1],
		Session: be.Uint32(b[2:]),
		Length:  be.Uint32(b[6:]),
	}, nil
}

// ReadFrame reads one frame from r. A length over max is ErrFrameTooLarge,
// returned with the header before any of the payload is read, and NOTHING of
// that size is allocated.
//
// The header is read into buf when it has the capacity. The payload is read
// into buf when it fits (buf may be reused by the caller, so the payload is
// only valid until then), else into a new slice of exactly Length bytes;
// past 1 MiB that slice grows as the bytes arrive.
// A clean end of input before the header is io.EOF; an end inside the frame
// is an error wrapping io.ErrUnexpectedEOF.
func ReadFrame(r io.Reader, max uint32, buf []byte) (Header, []byte, error) {
	hb := buf[:0]
	if cap(hb) < HeaderLen {
		hb = make([]byte, HeaderLen)
	}
	hb = hb[:HeaderLen]
	if _, err := io.ReadFull(r, hb); err != nil {
		if err == io.EOF {
			return Header{}, nil, io.EOF
		}
		return Header{}, nil, fmt.Errorf("read frame header: %w", err)
	}
	h, _ := ParseHeader(hb)
	if h.Length > max {
		return h, nil, tooLarge(h, max)
	}
	p, err := readPayload(r, h, buf)
	return h, p, err
}

// eagerPayload is the largest payload read into a slice made at its full
// declared size. A larger one grows as its bytes arrive, so that a peer
// must send a large frame, not merely declare it, to make this side hold
// that much memory.
const eagerPayload = 1 << 20

// readPayload reads the h.Length payload bytes into buf if they fit, else
// into a new slice of exactly h.Length bytes. The caller has checked
// h.Length against its limit.
func readPayload(r io.Reader, h Header, buf []byte) ([]byte, error) {
	n := int(h.Length)
	var p []byte
	var err error
	switch {
	case uint64(h.Length) <= uint64(cap(buf)):
		p = buf[:n]
		_, err = io.ReadFull(r, p)
	case n <= eagerPayload:
		p = make([]byte, n)
		_, err = io.ReadFull(r, p)
	default:
		p, err = readGrowing(r, n)
	}
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("read %s payload of %d bytes: %w", h.Type, h.Length, err)
	}
	return p, nil
}

// readGrowing reads n bytes into a slice that starts at eagerPayload and
// doubles as it fills, ending at exactly n.
func readGrowing(r io.Reader, n int) ([]byte, error) {
	p := make([]byte, 0, eagerPayload)
	for len(p) < n {
		if len(p) == cap(p) {
			q := make([]byte, len(p), min(2*cap(p), n))
			copy(q, p)
			p = q
		}
		m, err := io.ReadFull(r, p[len(p):cap(p)])
		p = p[:len(p)+m]
		if err != nil {
			return nil, err
		}
	}
	return p, nil
}

func tooLarge(h Header, max uint32) error {
	return fmt.Errorf("%s frame declares %d payload bytes, limit %d: %w", h.Type, h.Length, max, ErrFrameTooLarge)
}

// maxPayload returns the longest payload a frame of type t may declare once
// the connection is authenticated: maxFrame for Data, controlMaxFrame for
// everything else, whose fields are all bounded.
func maxPayload(t Type, maxFrame uint32) uint32 {
	switch t {
	case TypeData:
		return maxFrame
	case TypeDeliver:
		// The message, as in Data, plus tag, attempt and reason.
		return maxFrame + 14 + maxStr16
	}
	return controlMaxFrame
}
