package message

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"time"
)

// CodecVersion is the first byte of every encoded message. A decoder that
// meets another version refuses it with ErrVersion rather than guess.
const CodecVersion = 1

// Encoding, version 1. All integers are big-endian.
//
//	offset  field        type      notes
//	[ 0]    version      uint8     CodecVersion
//	[ 1]    kind         uint8     1 command, 2 data, 3 file
//	[ 2]    priority     uint8     0..9
//	[ 3]    flags        uint8     bit 0: timestamp present; other bits must be 0
//	[ 4]    id           uint64
//	[12]    origin       [16]byte  NodeID
//	[28]    ttl          int64     nanoseconds
//	[36]    timestamp    int64     Unix nanoseconds; must be 0 when bit 0 is clear
//	[44]    destination  str16
//	        kind section, only the one of this kind:
//	          command    command str16, replyTo str16, correlationID str16
//	          data       dataType str16, encoding str16
//	          file       filesize int64, srcIdentifier str16, centerIdentifier str16,
//	                     destIdentifier str16, filename str16, fileChecksum str16,
//	                     sendFilePath str16, receivedFilePath str16
//	        count        uint16    number of application properties
//	        count times:
//	          key        str16
//	          type       uint8     Type: 1 bool .. 9 string
//	          value      bool, byte      1 byte (a bool is 0 or 1)
//	                     int16           2 bytes
//	                     int32, float32  4 bytes
//	                     int64, float64  8 bytes (floats as IEEE-754 bits)
//	                     bytes, string   str32
//	        body         str32
//
//	str16 = uint16 length n, then n bytes
//	str32 = uint32 length n, then n bytes
//
// Lengths are fixed-width rather than varints so that the encoding is
// canonical without extra checks (a varint can be padded with 0x80 bytes),
// and so that the decoder reads them with one load; it costs one byte per
// short string. The timestamp has a presence flag so that the zero time and
// the Unix epoch are both carried exactly.
const (
	headerLen     = 44
	flagTimestamp = 1 << 0
)

var be = binary.BigEndian

// The timestamps UnixNano can represent; outside them it is undefined, so
// the codec refuses them rather than send a wrong time.
var (
	minTimestamp = time.Unix(0, math.MinInt64)
	maxTimestamp = time.Unix(0, math.MaxInt64)
)

// AppendBinary appends the encoding of m to dst. It does not call Validate:
// it fails only on what the format cannot carry (an unknown kind or property
// type, a priority above 9, a duplicate key, a timestamp outside 1678–2262,
// a string or count too long for its length field), and then returns dst
// unchanged. It grows dst at most once.
func (m *Message) AppendBinary(dst []byte) ([]byte, error) {
	n, err := m.plan()
	if err != nil {
		return dst, err
	}
	dst = slices.Grow(dst, n)
	return m.appendTo(dst), nil
}

// MarshalBinary returns the encoding of m in a new slice.
func (m *Message) MarshalBinary() ([]byte, error) {
	return m.AppendBinary(nil)
}

// EncodedSize returns how many bytes AppendBinary appends for m. It is only
// meaningful when AppendBinary would succeed.
func (m *Message) EncodedSize() int {
	n, _ := m.plan()
	return n
}

// plan checks that m can be encoded and returns its encoded size, so that
// AppendBinary can grow its buffer once and then append without checks.
func (m *Message) plan() (int, error) {
	if !m.Kind.valid() {
		return 0, fmt.Errorf("kind %d: %w", uint8(m.Kind), ErrKind)
	}
	if m.Priority > MaxPriority {
		return 0, fmt.Errorf("priority %d: %w", m.Priority, ErrPriority)
	}
	if !encodableTime(m.Timestamp) {
		return 0, fmt.Errorf("timestamp %v: outside the years 1678 to 2262 that the codec carries: %w", m.Timestamp, ErrTimestamp)
	}
	if err := wireString("destination", m.Destination); err != nil {
		return 0, err
	}
	n := headerLen + 2 + len(m.Destination)
	if m.Kind == KindFile {
		n += 8 // filesize
	}
	ptrs, nk := m.kindStrings()
	for i, p := range ptrs[:nk] {
		if err := wireString(kindFieldNames[m.Kind][i], *p); err != nil {
			return 0, err
		}
		n += 2 + len(*p)
	}
	pn, err := m.Properties.plan()
	if err != nil {
		return 0, err
	}
	if int64(len(m.Body)) > wireMaxLen {
		return 0, fmt.Errorf("body of %d bytes: longer than the codec's %d: %w", len(m.Body), int64(wireMaxLen), ErrBodyTooLarge)
	}
	return n + pn + 4 + len(m.Body), nil
}

func wireString(what, s string) error {
	if len(s) > wireMaxString {
		return fmt.Errorf("%s of %d bytes: longer than the codec's %d: %w", what, len(s), wireMaxString, ErrHeaderTooLarge)
	}
	return nil
}

func encodableTime(t time.Time) bool {
	return t.IsZero() || !(t.Before(minTimestamp) || t.After(maxTimestamp))
}

// plan checks that p can be encoded and returns its encoded size, count
// included.
func (p Properties) plan() (int, error) {
	if len(p) > wireMaxCount {
		return 0, fmt.Errorf("%d properties: more than the codec's %d: %w", len(p), wireMaxCount, ErrTooManyProperties)
	}
	n := 2
	for i := range p {
		q := &p[i]
		switch {
		case len(q.Key) > wireMaxString:
			return 0, fmt.Errorf("property %s: key of %d bytes: longer than the codec's %d: %w",
				clip(q.Key), len(q.Key), wireMaxString, ErrPropertyTooLarge)
		case !q.Value.t.valid():
			return 0, fmt.Errorf("property %s: %s: %w", clip(q.Key), q.Value.t, ErrPropertyType)
		case int64(q.Value.size()) > wireMaxLen:
			return 0, fmt.Errorf("property %s: value of %d bytes: longer than the codec's %d: %w",
				clip(q.Key), q.Value.size(), int64(wireMaxLen), ErrPropertyTooLarge)
		}
		n += 2 + len(q.Key) + 1 + q.Value.wireLen()
	}
	if key, dup := p.duplicate(); dup {
		return 0, fmt.Errorf("property %s: %w", clip(key), ErrDuplicateProperty)
	}
	return n, nil
}

// wireLen is the encoded size of the value, without its type tag.
func (v Value) wireLen() int {
	if w := v.t.width(); w > 0 {
		return w
	}
	return 4 + len(v.s)
}

// appendTo appends the encoding of m, which plan has checked.
func (m *Message) appendTo(b []byte) []byte {
	var flags byte
	var ts int64
	if !m.Timestamp.IsZero() {
		flags |= flagTimestamp
		ts = m.Timestamp.UnixNano()
	}
	// The fixed header is written at the offsets drawn above.
	start := len(b)
	b = append(b, make([]byte, headerLen)...)
	h := b[start:]
	h[0], h[1], h[2], h[3] = CodecVersion, byte(m.Kind), m.Priority, flags
	be.PutUint64(h[4:], m.ID)
	copy(h[12:28], m.Origin[:])
	be.PutUint64(h[28:], uint64(m.TTL))
	be.PutUint64(h[36:], uint64(ts))
	b = appendStr16(b, m.Destination)
	if m.Kind == KindFile {
		b = be.AppendUint64(b, uint64(m.File.Filesize))
	}
	ptrs, nk := m.kindStrings()
	for _, p := range ptrs[:nk] {
		b = appendStr16(b, *p)
	}
	b = be.AppendUint16(b, uint16(len(m.Properties)))
	for i := range m.Properties {
		q := &m.Properties[i]
		b = appendStr16(b, q.Key)
		b = append(b, byte(q.Value.t))
		b = q.Value.appendTo(b)
	}
	b = be.AppendUint32(b, uint32(len(m.Body)))
	return append(b, m.Body...)
}

func (v Value) appendTo(b []byte) []byte {
	switch v.t.width() {
	case 1:
		return append(b, byte(v.n))
	case 2:
		return be.AppendUint16(b, uint16(v.n))
	case 4:
		return be.AppendUint32(b, uint32(v.n))
	case 8:
		return be.AppendUint64(b, v.n)
	}
	b = be.AppendUint32(b, uint32(len(v.s)))
	return append(b, v.s...)
}

func appendStr16(b []byte, s string) []byte {
	b = be.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}
