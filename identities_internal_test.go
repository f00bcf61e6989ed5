package petrel

import (
	"testing"
	"time"

	"github.com/petrelmq/petrel/message"
)

// TestClientBindingsCapEvictsOldest: past the cap, the binding whose last
// handshake is the oldest goes first, and is counted; a refreshed binding
// is the youngest again.
func TestClientBindingsCapEvictsOldest(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	c := newClientBindings(24*time.Hour, 3)
	id := func(b byte) message.NodeID { return message.NodeID{b} }
	for b := byte(1); b <= 3; b++ {
		c.touch(id(b), "app", now)
		now = now.Add(time.Minute)
	}
	c.touch(id(1), "app", now) // refreshed: 2 is the oldest now
	c.touch(id(4), "app", now)
	if _, ok := c.owner(id(2), now); ok {
		t.Fatal("the oldest binding was kept past the cap")
	}
	for _, b := range []byte{1, 3, 4} {
		if _, ok := c.owner(id(b), now); !ok {
			t.Fatalf("binding %d dropped", b)
		}
	}
	if c.evicted != 1 || c.order.Len() != 3 || len(c.byID) != 3 {
		t.Fatalf("evicted %d, held %d/%d; want 1, 3/3", c.evicted, c.order.Len(), len(c.byID))
	}
	now = now.Add(24*time.Hour - time.Minute)
	c.expire(now)
	if _, ok := c.owner(id(1), now); !ok || c.order.Len() != 2 {
		t.Fatalf("after a day since 3's handshake: held %d, want 1 and 4", c.order.Len())
	}
}

func TestParseBindings(t *testing.T) {
	now := time.Unix(1_000_000, 0).UTC()
	tests := []struct {
		name, raw      string
		nodes, clients int
		ok             bool
	}{
		{"first format", `{"plant-7": "706c616e742d37000000000000000000"}`, 1, 0, true},
		{"empty", `{}`, 0, 0, true},
		{"both", `{"nodes": {"plant-7": "706c616e742d37000000000000000000"}, "clients": {"01000000000000000000000000000000": {"identity": "app-1", "seen": "1970-01-12T13:46:40Z"}}}`, 1, 1, true},
		{"expired client", `{"nodes": {}, "clients": {"01000000000000000000000000000000": {"identity": "app-1", "seen": "1970-01-01T00:00:00Z"}}}`, 0, 0, true},
		{"bad node id", `{"plant-7": "zz"}`, 0, 0, false},
		{"bad client id", `{"clients": {"zz": {"identity": "app-1"}}}`, 0, 0, false},
		{"bad client name", `{"clients": {"01000000000000000000000000000000": {"identity": "../x"}}}`, 0, 0, false},
		{"not json", `nodes`, 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClientBindings(24*time.Hour, 10)
			nodes, err := parseBindings([]byte(tt.raw), c, now)
			if (err == nil) != tt.ok || len(nodes) != tt.nodes || c.order.Len() != tt.clients {
				t.Fatalf("parse: %d nodes, %d clients, %v; want %d, %d, ok %v", len(nodes), c.order.Len(), err, tt.nodes, tt.clients, tt.ok)
			}
		})
	}
}

// FuzzParseBindings: the bindings file is read at start from the data
// directory, where anything may have been written to it. Whatever it
// holds, parsing returns an error or client bindings that hold: no more
// than the bound, each with a valid name and still in force, each indexed.
func FuzzParseBindings(f *testing.F) {
	for _, s := range []string{
		`{"plant-7": "706c616e742d37000000000000000000"}`,
		`{"nodes": {"plant-7": "706c616e742d37000000000000000000"}, "clients": {"01000000000000000000000000000000": {"identity": "app-1", "seen": "1970-01-12T13:46:40Z"}}}`,
		`{"clients": {"01000000000000000000000000000000": {"identity": "../x", "seen": "1970-01-12T13:46:40Z"}}}`,
		`{"nodes": {}, "clients": {"01000000000000000000000000000000": {"identity": "app-1", "seen": "1970-01-01T00:00:00Z"}}}`,
		`{"nodes": null, "clients": {}}`,
	} {
		f.Add([]byte(s))
	}
	now := time.Unix(1_000_000, 0).UTC()
	const ttl, bound = 24 * time.Hour, 3
	f.Fuzz(func(t *testing.T, raw []byte) {
		c := newClientBindings(ttl, bound)
		if _, err := parseBindings(raw, c, now); err != nil {
			return
		}
		if c.order.Len() > bound || len(c.byID) != c.order.Len() {
			t.Fatalf("%d client bindings, %d indexed; bound %d", c.order.Len(), len(c.byID), bound)
		}
		for e := c.order.Front(); e != nil; e = e.Next() {
			b := e.Value.(*clientBinding)
			if err := message.ValidName(b.name); err != nil {
				t.Fatalf("client binding %s kept an invalid name: %v", b.id, err)
			}
			if now.Sub(b.seen) >= ttl {
				t.Fatalf("client binding %s kept past its time: seen %v", b.id, b.seen)
			}
		}
	})
}
