package message

import (
	"errors"
	"testing"
	"time"
)

func TestSetEncodedTTL(t *testing.T) {
	m := &Message{ID: 1, Destination: "q", Kind: KindData, Priority: 4, TTL: 10 * time.Second, Body: []byte("x")}
	data, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if ttl, err := EncodedTTL(data); err != nil || ttl != 10*time.Second {
		t.Fatalf("EncodedTTL = %v, %v", ttl, err)
	}
	if err := SetEncodedTTL(data, 3*time.Second); err != nil {
		t.Fatal(err)
	}
	got, err := Decode(data, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if got.TTL != 3*time.Second || string(got.Body) != "x" {
		t.Fatalf("after patch: %+v", got)
	}
	if err := SetEncodedTTL(data[:10], time.Second); !errors.Is(err, ErrTruncated) {
		t.Fatalf("short input: %v", err)
	}
	data[0] = 9
	if _, err := EncodedTTL(data); !errors.Is(err, ErrVersion) {
		t.Fatalf("wrong version: %v", err)
	}
}

func TestEncodedKind(t *testing.T) {
	for _, k := range []Kind{KindCommand, KindData, KindFile} {
		m := &Message{Kind: k, Destination: "a", Priority: 4}
		if k == KindFile {
			m.File.Filename = "x"
		}
		b, err := m.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if got := EncodedKind(b); got != k {
			t.Errorf("EncodedKind = %v, want %v", got, k)
		}
	}
	if got := EncodedKind([]byte{1, 3}); got != 0 {
		t.Errorf("EncodedKind of a truncated message = %v, want 0", got)
	}
}
