package sender

import (
	"context"
	"errors"
	"testing"

	"github.com/petrelmq/petrel/message"
)

func TestChecksumsHandOverAndForget(t *testing.T) {
	var none *Checksums
	m := &message.Message{Origin: message.NodeID{1}, ID: 5}
	if _, ok, err := none.wait(context.Background(), m); ok || err != nil || none.failed(m) != nil || none.Len() != 0 {
		t.Fatal("a nil registry has entries")
	}
	c := NewChecksums()
	if _, ok, _ := c.wait(context.Background(), m); ok {
		t.Fatal("an entry for a message never registered")
	}
	done := c.Begin(m.Origin, m.ID)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, ok, err := c.wait(ctx, m); !ok || !errors.Is(err, context.Canceled) {
		t.Fatalf("wait with a done context = %v, %v", ok, err)
	}
	if c.failed(m) != nil {
		t.Fatal("a hash in progress counts as failed")
	}
	done("abc", nil)
	done("", errors.New("late")) // a second outcome is ignored
	if sum, ok, err := c.wait(context.Background(), m); !ok || err != nil || sum != "abc" {
		t.Fatalf("wait = %q, %v, %v", sum, ok, err)
	}
	other := &message.Message{Origin: message.NodeID{1}, ID: 6}
	fail := c.Begin(other.Origin, other.ID)
	fail("", errors.New("changed"))
	if err := c.failed(other); err == nil || err.Error() != "changed" {
		t.Fatalf("failed = %v", err)
	}
	c.forget(m)
	c.forget(other)
	if c.Len() != 0 {
		t.Fatalf("%d entries after forget", c.Len())
	}
}

// A withdrawn hash (ErrNotHashed) leaves the worker to hash the file
// itself: no failure, no entry to wait for, and nothing for Forgotten. A
// failed hash, given back at a start (GivenUp) or not, reaches Forgotten
// once settled; Drop removes an entry without it.
func TestChecksumsWithdrawnGivenUpAndDropped(t *testing.T) {
	c := NewChecksums()
	var forgotten []uint64
	c.Forgotten = func(_ message.NodeID, id uint64) { forgotten = append(forgotten, id) }
	withdrawn := &message.Message{Origin: message.NodeID{1}, ID: 1}
	c.Begin(withdrawn.Origin, withdrawn.ID)("", ErrNotHashed)
	if err := c.failed(withdrawn); err != nil {
		t.Fatalf("a withdrawn hash counts as failed: %v", err)
	}
	if _, ok, err := c.wait(context.Background(), withdrawn); ok || err != nil {
		t.Fatalf("wait on a withdrawn hash = %v, %v; want the worker to hash the file itself", ok, err)
	}
	failed := &message.Message{Origin: message.NodeID{1}, ID: 2}
	c.Begin(failed.Origin, failed.ID)("", errors.New("changed"))
	given := &message.Message{Origin: message.NodeID{1}, ID: 3}
	c.GivenUp(given.Origin, given.ID, errors.New("recorded"))
	if err := c.failed(given); err == nil || err.Error() != "recorded" {
		t.Fatalf("failed after GivenUp = %v", err)
	}
	ok := &message.Message{Origin: message.NodeID{1}, ID: 4}
	c.Begin(ok.Origin, ok.ID)("abc", nil)
	c.Begin(message.NodeID{1}, 5)
	c.Drop(message.NodeID{1}, 5)
	c.Begin(message.NodeID{1}, 6) // pending: not given up yet
	if got := c.GivenUpCount(); got != 2 {
		t.Fatalf("GivenUpCount = %d; want the failed hashes 2 and 3", got)
	}
	for id, want := range map[uint64]bool{1: false, 2: true, 3: true, 4: false, 5: false, 6: false} {
		if got := c.IsGivenUp(message.NodeID{1}, id); got != want {
			t.Errorf("IsGivenUp(%d) = %v; want %v", id, got, want)
		}
	}
	c.Drop(message.NodeID{1}, 6)
	for _, m := range []*message.Message{withdrawn, failed, given, ok} {
		c.forget(m)
	}
	if c.Len() != 0 {
		t.Fatalf("%d entries left", c.Len())
	}
	if len(forgotten) != 2 || forgotten[0] != 2 || forgotten[1] != 3 {
		t.Fatalf("Forgotten learned of %v; want the failed hashes 2 and 3", forgotten)
	}
}
