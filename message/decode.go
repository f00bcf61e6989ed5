package message

import (
	"fmt"
	"math"
	"time"
	"unicode/utf8"
	"unsafe"
)

// Decode reads one encoded message; the whole of data must be that message.
// It never panics and never retains data.
//
// Decode runs over data twice. The scan pass checks every length against the
// bytes that remain and against lim, and checks kinds, types, flags and
// duplicate keys, without allocating (except a set of keys, bounded by the
// input, past 8 properties). Only a message that passes is built, with at
// most two allocations: the Message, with up to four properties in it, and
// one buffer that every string and the body are copied into (so a string
// kept from a decoded message keeps its body alive too). So a hostile length costs
// nothing, and a failed decode costs little more than its error.
func Decode(data []byte, lim Limits) (*Message, error) {
	scan, err := scanMessage(data, lim)
	if err != nil {
		return nil, err
	}
	// A message with few properties gets them in the same allocation.
	var m *Message
	var inline Properties
	if scan.props > 0 && scan.props <= inlineProps {
		mp := new(messageWithProps)
		m, inline = &mp.m, mp.p[:0:scan.props]
	} else {
		m = new(Message)
	}
	if err := fillMessage(m, scan, inline); err != nil {
		return nil, err
	}
	return m, nil
}

// inlineProps is how many properties Decode allocates with the Message.
const inlineProps = 4

type messageWithProps struct {
	m Message
	p [inlineProps]Property
}

// UnmarshalBinary decodes data into m with DefaultLimits. On error m is left
// unchanged.
func (m *Message) UnmarshalBinary(data []byte) error {
	scan, err := scanMessage(data, DefaultLimits())
	if err != nil {
		return err
	}
	*m = Message{}
	return fillMessage(m, scan, nil)
}

func scanMessage(data []byte, lim Limits) (reader, error) {
	var probe Message // holds views of data that never leave this function
	return scanInto(data, lim, &probe)
}

// scanInto is the scan pass, leaving in probe what it read: strings and
// bytes in probe are views of data, valid only while data is.
func scanInto(data []byte, lim Limits, probe *Message) (reader, error) {
	r := reader{in: data, lim: lim.effective()}
	r.message(probe)
	return r, r.err
}

// fillMessage decodes into m the input that scan accepted.
func fillMessage(m *Message, scan reader, inline Properties) error {
	// Strings and the body share one allocation: the body at its end,
	// capped so that appending to it copies.
	back := make([]byte, scan.used+scan.bodyLen)
	fill := reader{in: scan.in, lim: scan.lim, back: back[:scan.used:scan.used], bodyBack: back[scan.used:], inline: inline, filling: true}
	fill.message(m)
	if fill.err == nil && fill.used != len(fill.back) {
		fill.fail(fmt.Errorf("scan measured %d string bytes, fill used %d: %w", scan.used, fill.used, ErrCorrupt))
	}
	// The scan pass accepted this input, so an error here is a bug in the
	// decoder; it is still returned rather than risk a half-filled message.
	return fill.err
}

// reader walks an encoding with a sticky error: after the first failure
// every read returns zero values, so callers check r.err only where it
// matters (before loops and allocations).
type reader struct {
	in  []byte
	off int
	lim Limits // effective limits
	err error

	// filling is false for the scan pass, in which strings are views of in
	// and used counts their bytes. In the fill pass strings are copied into
	// back, and used is how much of back is taken.
	filling bool
	back    []byte
	used    int

	// props and bodyLen are what the scan pass counted; bodyBack is where
	// the fill pass copies the body.
	props    int
	bodyLen  int
	bodyBack []byte
	// inline, when it has room, takes the properties (see Decode).
	inline Properties
	// strict refuses, in the scan pass, the property keys Validate
	// refuses and the codec carries: empty, or not UTF-8 (see PeekValid).
	strict bool
}

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

// take returns the next n bytes of input, capped so that appending to them
// cannot reach the bytes after.
func (r *reader) take(n int, what string) []byte {
	if r.err != nil {
		return nil
	}
	if rest := len(r.in) - r.off; n > rest {
		r.fail(fmt.Errorf("%s: needs %d bytes at offset %d, %d remain: %w", what, n, r.off, rest, ErrTruncated))
		return nil
	}
	b := r.in[r.off : r.off+n : r.off+n]
	r.off += n
	return b
}

func (r *reader) u8(what string) byte {
	if b := r.take(1, what); b != nil {
		return b[0]
	}
	return 0
}

func (r *reader) u16(what string) uint16 {
	if b := r.take(2, what); b != nil {
		return be.Uint16(b)
	}
	return 0
}

func (r *reader) u32(what string) uint32 {
	if b := r.take(4, what); b != nil {
		return be.Uint32(b)
	}
	return 0
}

func (r *reader) u64(what string) uint64 {
	if b := r.take(8, what); b != nil {
		return be.Uint64(b)
	}
	return 0
}

// str reads n bytes as a string. The fill pass copies them into back and
// returns a string over that copy; back is never handed out as a slice, so
// those strings are as immutable as any other.
func (r *reader) str(n int, what string) string {
	b := r.take(n, what)
	if len(b) == 0 {
		return ""
	}
	if !r.filling {
		r.used += n
		return unsafe.String(&b[0], n)
	}
	if n > len(r.back)-r.used {
		r.fail(fmt.Errorf("%s: string space exhausted: %w", what, ErrCorrupt))
		return ""
	}
	c := r.back[r.used : r.used+n]
	copy(c, b)
	r.used += n
	return unsafe.String(&c[0], n)
}

// headerString reads a str16 bounded by MaxHeaderString.
func (r *reader) headerString(what string) string {
	n := int(r.u16(what))
	if r.err == nil && n > r.lim.MaxHeaderString {
		r.fail(fmt.Errorf("%s of %d bytes exceeds limit %d: %w", what, n, r.lim.MaxHeaderString, ErrHeaderTooLarge))
		return ""
	}
	return r.str(n, what)
}

func (r *reader) message(m *Message) {
	r.header(m)
	m.Destination = r.headerString("destination")
	if m.Kind == KindFile {
		m.File.Filesize = int64(r.u64("filesize"))
	}
	ptrs, nk := m.kindStrings()
	for i, p := range ptrs[:nk] {
		*p = r.headerString(kindFieldNames[m.Kind][i])
	}
	r.properties(m)
	r.body(m)
	if r.err == nil && r.off != len(r.in) {
		r.fail(fmt.Errorf("%d bytes after the body: %w", len(r.in)-r.off, ErrCorrupt))
	}
}

func (r *reader) header(m *Message) {
	if len(r.in) > 0 && r.in[0] != CodecVersion {
		r.fail(fmt.Errorf("version %d, want %d: %w", r.in[0], CodecVersion, ErrVersion))
		return
	}
	h := r.take(headerLen, "header")
	if h == nil {
		return
	}
	m.Kind, m.Priority = Kind(h[1]), h[2]
	flags := h[3]
	m.ID = be.Uint64(h[4:])
	copy(m.Origin[:], h[12:28])
	m.TTL = time.Duration(be.Uint64(h[28:]))
	ts := int64(be.Uint64(h[36:]))
	switch {
	case !m.Kind.valid():
		r.fail(fmt.Errorf("kind %d: %w", h[1], ErrKind))
	case m.Priority > MaxPriority:
		r.fail(fmt.Errorf("priority %d: %w", m.Priority, ErrPriority))
	case flags&^flagTimestamp != 0:
		r.fail(fmt.Errorf("unknown flags %#02x: %w", flags, ErrCorrupt))
	case flags&flagTimestamp != 0:
		m.Timestamp = time.Unix(0, ts).UTC()
	case ts != 0:
		r.fail(fmt.Errorf("timestamp %d without its flag: %w", ts, ErrCorrupt))
	}
}

func (r *reader) properties(m *Message) {
	n := int(r.u16("property count"))
	if r.err != nil || n == 0 {
		return
	}
	if n > r.lim.MaxProperties {
		r.fail(fmt.Errorf("%d properties exceed limit %d: %w", n, r.lim.MaxProperties, ErrTooManyProperties))
		return
	}
	// Each property takes at least a key length, a type and one value byte.
	if rest := len(r.in) - r.off; n*4 > rest {
		r.fail(fmt.Errorf("%d properties: need at least %d bytes, %d remain: %w", n, n*4, rest, ErrTruncated))
		return
	}
	r.props = n
	if r.filling {
		// Duplicates were rejected by the scan pass.
		if cap(r.inline) >= n {
			m.Properties = r.inline[:n:n]
		} else {
			m.Properties = make(Properties, n)
		}
		for i := range m.Properties {
			r.property(&m.Properties[i])
		}
		return
	}
	var keys keySet
	for range n {
		var p Property
		r.property(&p)
		if r.err != nil {
			return
		}
		if !keys.add(p.Key) {
			r.fail(fmt.Errorf("property %s: %w", clip(p.Key), ErrDuplicateProperty))
			return
		}
	}
}

// property reads one property into p; on error p is left partly set.
func (r *reader) property(p *Property) {
	klen := int(r.u16("property key length"))
	if r.err == nil && klen > r.lim.MaxPropertyBytes {
		r.fail(fmt.Errorf("property key of %d bytes exceeds limit %d: %w", klen, r.lim.MaxPropertyBytes, ErrPropertyTooLarge))
	}
	key := r.str(klen, "property key")
	if r.strict && r.err == nil && (key == "" || !utf8.ValidString(key)) {
		r.fail(fmt.Errorf("property %s: key is empty or not UTF-8: %w", clip(key), ErrPropertyKey))
	}
	t := Type(r.u8("property type"))
	if r.err != nil {
		return
	}
	size := uint64(t.width())
	switch {
	case t == TypeBytes || t == TypeString:
		size = uint64(r.u32("property value length"))
	case !t.valid():
		r.fail(fmt.Errorf("property %s: type %d: %w", clip(key), uint8(t), ErrPropertyType))
	}
	if r.err == nil && uint64(klen)+size > uint64(r.lim.MaxPropertyBytes) {
		r.fail(fmt.Errorf("property %s: key and value of %d bytes exceed limit %d: %w",
			clip(key), uint64(klen)+size, r.lim.MaxPropertyBytes, ErrPropertyTooLarge))
	}
	if r.err != nil {
		return
	}
	p.Key, p.Value = key, r.value(t, int(size), key)
}

// value reads a value of type t and wire size n, already checked against
// the limits.
func (r *reader) value(t Type, n int, key string) Value {
	switch t {
	case TypeBool:
		b := r.u8("bool value")
		if b > 1 {
			r.fail(fmt.Errorf("property %s: bool byte %d: %w", clip(key), b, ErrCorrupt))
		}
		return Bool(b == 1)
	case TypeByte:
		return Byte(r.u8("byte value"))
	case TypeInt16:
		return Int16(int16(r.u16("int16 value")))
	case TypeInt32:
		return Int32(int32(r.u32("int32 value")))
	case TypeInt64:
		return Int64(int64(r.u64("int64 value")))
	case TypeFloat32:
		// Straight from the bits, so that no float conversion can touch a
		// NaN payload.
		return Value{t: t, n: uint64(r.u32("float32 value"))}
	case TypeFloat64:
		return Value{t: t, n: r.u64("float64 value")}
	}
	return Value{t: t, s: r.str(n, "property value")}
}

func (r *reader) body(m *Message) {
	n := r.u32("body length")
	if r.err == nil && uint64(n) > uint64(r.lim.MaxBody) {
		r.fail(fmt.Errorf("body of %d bytes exceeds limit %d: %w", n, r.lim.MaxBody, ErrBodyTooLarge))
	}
	b := r.take(int(min(uint64(n), math.MaxInt)), "body")
	r.bodyLen = len(b)
	if r.filling && len(b) > 0 {
		m.Body = r.bodyBack[:copy(r.bodyBack, b):len(b)]
	}
}
