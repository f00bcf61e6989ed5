package message_test

import (
	"testing"
	"time"

	"github.com/petrelmq/petrel/message"
)

// BenchmarkEncode1K appends into a reused buffer, as a frame writer does.
func BenchmarkEncode1K(b *testing.B) {
	m := oneK()
	buf := make([]byte, 0, 2048)
	b.SetBytes(int64(m.EncodedSize()))
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = m.AppendBinary(buf[:0]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMarshal1K allocates a fresh slice per message.
func BenchmarkMarshal1K(b *testing.B) {
	m := oneK()
	b.SetBytes(int64(m.EncodedSize()))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.MarshalBinary(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecode1K(b *testing.B) {
	enc := mustEncode(b, oneK())
	b.SetBytes(int64(len(enc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := message.Decode(enc, message.Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRoundTrip1K is one encode into a reused buffer plus one decode:
// the per-message codec cost of a hop.
func BenchmarkRoundTrip1K(b *testing.B) {
	m := oneK()
	buf := make([]byte, 0, 2048)
	b.SetBytes(int64(m.EncodedSize()))
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = m.AppendBinary(buf[:0]); err != nil {
			b.Fatal(err)
		}
		if _, err := message.Decode(buf, message.Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkValidate1K(b *testing.B) {
	m := oneK()
	b.ReportAllocs()
	for b.Loop() {
		if err := m.Validate(message.Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkIDGen(b *testing.B) {
	g := message.NewIDGen(0, time.Second, func(uint64) error { return nil }, nil)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := g.Next(); err != nil {
			b.Fatal(err)
		}
	}
}
