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
