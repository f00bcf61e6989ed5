package session

import (
	"fmt"
	"math"

	"github.com/petrelmq/petrel/message"
)

// Building blocks of every packet layout. All integers are big-endian.
//
//	str16  = uint16 length n, then n bytes
//	list8  = uint8 count n, then n items
//	NodeID = 16 bytes
//
// Lengths are fixed-width rather than varints, as in the message codec, so
// that every packet has exactly one encoding and a decoder reads a length
// with one load. Packets have no trailing length: the frame header bounds
// the payload, and a decoder refuses bytes left after the last field.

// maxStr16 is the longest string a str16 carries. AppendBinary cuts longer
// strings to this, at a byte boundary; the public API refuses names and
// addresses that long before they reach a packet, so only free-text reasons
// are ever cut.
const maxStr16 = math.MaxUint16

// maxList8 is the longest list a list8 carries.
const maxList8 = math.MaxUint8

func appendStr16(b []byte, s string) []byte {
	if len(s) > maxStr16 {
		s = s[:maxStr16]
	}
	b = be.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

func appendBytes16(b, s []byte) []byte {
	if len(s) > maxStr16 {
		s = s[:maxStr16]
	}
	b = be.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

// decoder walks a payload with a sticky error: after the first failure every
// read returns zero values, so a Decode function reads all its fields and
// checks the error once, in finish.
type decoder struct {
	p   []byte
	off int
	pkt string // packet name for errors
	err error
}

func (d *decoder) take(n int, field string) []byte {
	if d.err != nil {
		return nil
	}
	if rest := len(d.p) - d.off; n > rest {
		d.err = fmt.Errorf("%s: %s needs %d bytes at offset %d, %d remain: %w", d.pkt, field, n, d.off, rest, ErrMalformed)
		return nil
	}
	b := d.p[d.off : d.off+n : d.off+n]
	d.off += n
	return b
}

func (d *decoder) u8(field string) uint8 {
	if b := d.take(1, field); b != nil {
		return b[0]
	}
	return 0
}

func (d *decoder) u16(field string) uint16 {
	if b := d.take(2, field); b != nil {
		return be.Uint16(b)
	}
	return 0
}

func (d *decoder) u32(field string) uint32 {
	if b := d.take(4, field); b != nil {
		return be.Uint32(b)
	}
	return 0
}

func (d *decoder) u64(field string) uint64 {
	if b := d.take(8, field); b != nil {
		return be.Uint64(b)
	}
	return 0
}

func (d *decoder) nodeID(field string) (id message.NodeID) {
	copy(id[:], d.take(len(id), field))
	return id
}

func (d *decoder) nonce(field string) (n [32]byte) {
	copy(n[:], d.take(len(n), field))
	return n
}

// str16 returns a copy of the string, so the payload is not retained.
func (d *decoder) str16(field string) string {
	n := int(d.u16(field + " length"))
	return string(d.take(n, field))
}

// bytes16 returns a copy of the bytes, nil when empty.
func (d *decoder) bytes16(field string) []byte {
	n := int(d.u16(field + " length"))
	b := d.take(n, field)
	if len(b) == 0 {
		return nil
	}
	return append([]byte(nil), b...)
}

// rest returns the remaining bytes, without copying.
func (d *decoder) rest() []byte {
	return d.take(len(d.p)-d.off, "rest")
}

// finish returns the first error, or ErrMalformed if bytes are left over.
func (d *decoder) finish() error {
	if d.err == nil && d.off != len(d.p) {
		d.err = fmt.Errorf("%s: %d trailing bytes after the last field: %w", d.pkt, len(d.p)-d.off, ErrMalformed)
	}
	return d.err
}
