package message

import (
	"errors"
	"testing"
	"time"
)

func TestPeekMatchesDecode(t *testing.T) {
	m := &Message{ID: 7, Origin: NodeID{9}, Destination: "orders@b", Kind: KindCommand, Priority: 8,
		TTL: time.Minute, Timestamp: time.Unix(100, 5).UTC(), Body: []byte("body")}
	m.Command.Command = "go"
	m.Properties.Set("k", Int32(1))
	data, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	h, err := Peek(data, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if h.ID != 7 || h.Origin != m.Origin || h.Destination != "orders@b" || h.Kind != KindCommand ||
		h.Priority != 8 || h.TTL != time.Minute || !h.Timestamp.Equal(m.Timestamp) || h.Body != nil || h.Properties != nil {
		t.Fatalf("Peek = %+v", h)
	}
	// Whatever Decode refuses, Peek refuses.
	for i := 0; i < len(data); i++ {
		if _, err := Peek(data[:i], Limits{}); err == nil {
			t.Fatalf("Peek accepted %d of %d bytes", i, len(data))
		}
	}
	if _, err := Peek(append(data, 0), Limits{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("trailing byte: %v", err)
	}
	if _, err := Peek(data, Limits{MaxBody: 2}); !errors.Is(err, ErrBodyTooLarge) {
		t.Fatalf("body over the limit: %v", err)
	}
	bad := *m
	bad.Destination = "a b"
	data, _ = bad.MarshalBinary()
	if _, err := Peek(data, Limits{}); !errors.Is(err, ErrDestination) {
		t.Fatalf("bad destination: %v", err)
	}
}

func BenchmarkPeek1K(b *testing.B) {
	m := &Message{ID: 7, Destination: "orders@b", Kind: KindData, Priority: 4, Body: make([]byte, 1024)}
	data, _ := m.MarshalBinary()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Peek(data, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}
