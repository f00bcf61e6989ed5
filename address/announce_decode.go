package address

import (
	"crypto/hmac"
	"encoding/binary"
	"fmt"

	"github.com/petrelmq/petrel/message"
)

// DecodeAnnouncement reads one announcement; the whole of b must be that
// announcement. It never panics, never retains b, and checks every length
// and count against the bytes that remain before it allocates, so a hostile
// packet costs at most a few allocations bounded by its size.
//
// With an empty secret the MAC, if any, is not checked: a node without a
// secret accepts what any node announces. With a secret, an announcement
// without a MAC, or with one the secret did not make, is refused with
// ErrAnnouncementMAC. Every other error wraps ErrAnnouncement.
func DecodeAnnouncement(b []byte, secret []byte) (Announcement, error) {
	if len(b) > MaxAnnouncementSize {
		return Announcement{}, fmt.Errorf("announcement of %d bytes, more than %d: %w", len(b), MaxAnnouncementSize, ErrAnnouncement)
	}
	if len(b) < annHeaderLen || string(b[:len(AnnouncementMagic)]) != AnnouncementMagic {
		return Announcement{}, fmt.Errorf("packet of %d bytes does not start with %q, so it is not a Petrel announcement: %w", len(b), AnnouncementMagic, ErrAnnouncement)
	}
	v := b[len(AnnouncementMagic)]
	if v != AnnouncementVersion && v != AnnouncementVersionNoSeq {
		return Announcement{}, fmt.Errorf("announcement version %d, this node reads versions %d and %d: %w", v, AnnouncementVersionNoSeq, AnnouncementVersion, ErrAnnouncement)
	}
	r := annReader{b: b, off: annHeaderLen}
	a := r.announcement(v == AnnouncementVersion)
	macStart := r.off
	mac := r.take(int(r.u8()), "MAC")
	switch {
	case r.err != nil:
		return Announcement{}, r.err
	case len(mac) != 0 && len(mac) != macLen:
		return Announcement{}, r.fail(macStart, fmt.Sprintf("MAC of %d bytes, want 0 or %d", len(mac), macLen))
	case r.off != len(b):
		return Announcement{}, r.fail(r.off, fmt.Sprintf("%d bytes after the end of the announcement", len(b)-r.off))
	}
	if len(secret) > 0 {
		if len(mac) == 0 {
			return Announcement{}, fmt.Errorf("announcement of %s has no MAC: %w", quote(a.Name), ErrAnnouncementMAC)
		}
		if !hmac.Equal(mac, appendMAC(nil, secret, b[:macStart])) {
			return Announcement{}, fmt.Errorf("announcement of %s has a MAC made with another secret: %w", quote(a.Name), ErrAnnouncementMAC)
		}
	}
	return a, nil
}

// annReader reads an announcement with a sticky error: after the first
// failure every read returns zero values, and err says what and where.
type annReader struct {
	b   []byte
	off int
	err error
}

func (r *annReader) fail(off int, reason string) error {
	if r.err == nil {
		r.err = fmt.Errorf("announcement byte %d: %s: %w", off, reason, ErrAnnouncement)
	}
	return r.err
}

// take returns the next n bytes, a view of the input.
func (r *annReader) take(n int, what string) []byte {
	if r.err != nil {
		return nil
	}
	if n > len(r.b)-r.off {
		r.fail(r.off, fmt.Sprintf("%s needs %d bytes, %d remain", what, n, len(r.b)-r.off))
		return nil
	}
	v := r.b[r.off : r.off+n]
	r.off += n
	return v
}

func (r *annReader) u8() byte {
	if v := r.take(1, "a byte"); v != nil {
		return v[0]
	}
	return 0
}

// str reads a str8 of at least min bytes.
func (r *annReader) str(what string, min int) string {
	off := r.off
	n := int(r.u8())
	if r.err == nil && n < min {
		r.fail(off, what+" is empty")
		return ""
	}
	return string(r.take(n, what))
}

// count reads a list count of at most max items, each at least minLen
// bytes, and checks that they can fit in what remains.
func (r *annReader) count(what string, max, minLen int) int {
	off := r.off
	n := int(r.u8())
	switch {
	case r.err != nil:
		return 0
	case n > max:
		r.fail(off, fmt.Sprintf("%d %s, more than %d", n, what, max))
		return 0
	case n*minLen > len(r.b)-r.off:
		r.fail(off, fmt.Sprintf("%d %s cannot fit in the %d bytes that remain", n, what, len(r.b)-r.off))
		return 0
	}
	return n
}

// announcement reads what follows the version; withSeq for version 2.
func (r *annReader) announcement(withSeq bool) Announcement {
	var a Announcement
	off := r.off
	a.Name = r.str("node name", 1)
	if r.err == nil && message.ValidName(a.Name) != nil {
		r.fail(off, badNodeName(a.Name))
	}
	off = r.off
	copy(a.ID[:], r.take(len(a.ID), "node id"))
	if r.err == nil && a.ID.IsZero() {
		r.fail(off, "node id is zero")
	}
	if withSeq {
		off = r.off
		if v := r.take(seqLen, "sequence"); v != nil {
			a.Seq = binary.BigEndian.Uint64(v)
		}
		if r.err == nil && a.Seq == 0 {
			// Version 1 says "no sequence"; one meaning, one encoding.
			r.fail(off, "sequence is zero")
		}
	}
	n := r.count("connector pairs", MaxAnnouncedPairs, minPairLen)
	if n > 0 {
		a.Pairs = make([]ConnectorPair, 0, n)
	}
	for range n {
		p := ConnectorPair{Main: r.connector()}
		off := r.off
		switch r.u8() {
		case 0:
		case 1:
			backup := r.connector()
			p.Backup = &backup
		default:
			r.fail(off, "has-backup is neither 0 nor 1")
		}
		if r.err != nil {
			return Announcement{}
		}
		a.Pairs = append(a.Pairs, p)
	}
	return a
}

func (r *annReader) connector() AnnouncedConnector {
	c := AnnouncedConnector{
		Name:    r.str("connector name", 1),
		Factory: r.str("connector factory", 1),
	}
	n := r.count("parameters", MaxAnnouncedParams, minParamLen)
	if n > 0 {
		c.Params = make([]Param, 0, n)
	}
	for range n {
		off := r.off
		p := r.param()
		for _, q := range c.Params {
			if r.err == nil && q.Key == p.Key {
				r.fail(off, fmt.Sprintf("parameter %s given twice", quote(p.Key)))
			}
		}
		if r.err != nil {
			return AnnouncedConnector{}
		}
		c.Params = append(c.Params, p)
	}
	return c
}

func (r *annReader) param() Param {
	p := Param{Key: r.str("parameter name", 1)}
	off := r.off
	switch typ := r.u8(); typ {
	case paramBool:
		switch r.u8() {
		case 0:
			p.Value = false
		case 1:
			p.Value = true
		default:
			r.fail(off+1, fmt.Sprintf("bool parameter %s is neither 0 nor 1", quote(p.Key)))
		}
	case paramInt32:
		if v := r.take(4, "int32 value"); v != nil {
			p.Value = int32(binary.BigEndian.Uint32(v))
		}
	case paramInt64:
		if v := r.take(8, "int64 value"); v != nil {
			p.Value = int64(binary.BigEndian.Uint64(v))
		}
	case paramString:
		p.Value = r.str("string value", 0)
	default:
		r.fail(off, fmt.Sprintf("parameter %s has type %d, want 0 bool, 1 int32, 2 int64 or 3 string", quote(p.Key), typ))
	}
	return p
}
