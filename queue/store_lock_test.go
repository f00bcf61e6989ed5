package queue

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
)

// TestStoreLockedWhileOpen: a store open in one Store refuses a second
// with ErrInUse, at once, and opens again once the first closed. Two
// Stores on one database would each deliver what the other leases.
func TestStoreLockedWhileOpen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "petrel.db")
	first := openAt(t, path, nil)
	mustPut(t, mustQueue(t, first, "q", KindReceive), msg(4, "one"))
	if s, err := Open(ctx, Config{Path: path, Logger: quiet}); !errors.Is(err, ErrInUse) {
		if s != nil {
			s.Close()
		}
		t.Fatalf("a second Store on an open store: %v, want ErrInUse", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	again := openAt(t, path, nil)
	q, ok := again.Lookup("q")
	if !ok {
		t.Fatal("queue q lost")
	}
	if got := drain(t, q); len(got) != 1 || got[0] != "one" {
		t.Fatalf("reopened after the refusal: %q, want [one]", got)
	}
}
