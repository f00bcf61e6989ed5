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
