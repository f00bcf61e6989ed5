package mqttgw

import (
	"math/rand/v2"
	"testing"
)

// The size guard finds packet boundaries however the reads split the
// stream: packets within the maximum, of every remaining length width,
// pass; the first past it is found, in the read that brings the end of
// its header.
func TestSizeGuardFollowsBoundaries(t *testing.T) {
	const max = 70000
	header := func(remaining int) []byte {
		h := []byte{0x32}
		for {
			c := byte(remaining & 0x7F)
			remaining >>= 7
			if remaining > 0 {
				c |= 0x80
			}
			h = append(h, c)
			if remaining == 0 {
				return h
			}
		}
	}
	var stream []byte
	for _, n := range []int{0, 1, 127, 128, 16383, 16384, max - 1, 2, 0} {
		stream = append(stream, header(n)...)
		stream = append(stream, make([]byte, n)...)
	}
	good := len(stream)
	stream = append(stream, header(max)...)
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 1))
		s := &sizeGuard{max: max}
		for at := 0; at < len(stream); {
			k := min(1+r.IntN(5000), len(stream)-at)
			if seed%4 == 0 {
				k = 1 // a byte a read
			}
			over := s.over(stream[at : at+k])
			at += k
			if over != (at == len(stream)) {
				t.Fatalf("seed %d: over %v after %d bytes of %d (the last packet's header starts at %d)", seed, over, at, len(stream), good)
			}
			if over {
				break
			}
		}
	}
}

// FuzzSizeGuard: on any bytes, split anywhere, the size guard never
// panics, and finds the same thing whatever the split: whether a header
// passes the maximum, and after which byte. The reads mochi's connection
// gets are split however the network splits them.
func FuzzSizeGuard(f *testing.F) {
	f.Add([]byte{0x32, 0x05, 1, 2, 3, 4, 5, 0x30, 0xff, 0xff, 0x7f}, uint8(3), uint16(200))
	f.Add([]byte{0x10, 0x80, 0x80, 0x80, 0x80, 0x01}, uint8(1), uint16(10))
	f.Add([]byte{0x30, 0x00, 0x30, 0x7f}, uint8(2), uint16(0))
	f.Fuzz(func(t *testing.T, stream []byte, step uint8, max uint16) {
		where := func(split int) int {
			s := &sizeGuard{max: uint32(max)}
			for at := 0; at < len(stream); {
				k := min(split, len(stream)-at)
				if s.over(stream[at : at+k]) {
					return at + k
				}
				at += k
			}
			return -1
		}
		whole := where(len(stream) + 1)
		split := where(1 + int(step)%7)
		bytewise := where(1)
		// A split read reports at the end of the read that holds the
		// header's end, so at or after the byte a bytewise guard names.
		if (whole < 0) != (bytewise < 0) || (split < 0) != (bytewise < 0) {
			t.Fatalf("over in one read at %d, split at %d, byte by byte at %d", whole, split, bytewise)
		}
		if bytewise >= 0 && (split < bytewise || split > bytewise+7 || whole != len(stream)) {
			t.Fatalf("over byte by byte after %d bytes, split after %d, whole after %d of %d", bytewise, split, whole, len(stream))
		}
	})
}
