package mqttgw

import (
	"testing"

	"github.com/petrelmq/petrel/message"
)

// A session's notes are bounded: past maxResendNotes a delivery is not
// noted (it goes again under a new identifier). A note replaced, dropped
// or forgotten with its session gives its identifier back, and the
// total, the gauge petrel_mqtt_resend_noted, follows.
func TestResendNotesBounded(t *testing.T) {
	cfg := Config{MaxInflight: 1}
	bound := maxResendNotes(cfg)
	if bound != 10 {
		t.Fatalf("bound %d, want 10 (ten times max_inflight)", bound)
	}
	if b := maxResendNotes(Config{MaxInflight: 65535}); b != 1<<14 {
		t.Fatalf("bound %d for a large max_inflight, want %d", b, 1<<14)
	}
	r := newResends()
	key := func(i int) resendKey { return resendKey{filter: "t/#", origin: message.NodeID{1}, id: uint64(i)} }
	for i := range bound {
		if !r.note("c", key(i), resendNote{packetID: uint16(60000 + i)}, bound) {
			t.Fatalf("note %d refused under the bound", i)
		}
	}
	if r.note("c", key(bound), resendNote{packetID: 1}, bound) {
		t.Fatal("note past the bound taken")
	}
	if r.reserved("c", 1) {
		t.Fatal("identifier of a refused note reserved")
	}
	if !r.note("other", key(0), resendNote{packetID: 60000}, bound) {
		t.Fatal("another session's note refused: the bound is per session")
	}
	if r.total.Load() != int64(bound)+1 {
		t.Fatalf("total %d", r.total.Load())
	}
	// Noted again (a second connection ended with it in flight under
	// another identifier): the old identifier is free.
	if !r.note("c", key(0), resendNote{packetID: 50000, released: true}, bound) {
		t.Fatal("note replaced refused")
	}
	if r.reserved("c", 60000) || !r.reserved("c", 50000) {
		t.Fatal("replaced note's identifiers wrong")
	}
	if n, ok := r.peek("c", key(0)); !ok || n.packetID != 50000 || !n.released {
		t.Fatalf("peek %+v %v", n, ok)
	}
	r.drop("c", key(0))
	if _, ok := r.peek("c", key(0)); ok || r.reserved("c", 50000) {
		t.Fatal("dropped note still there")
	}
	r.forget("c")
	if r.total.Load() != 1 || r.reserved("c", 60001) {
		t.Fatalf("after forget: total %d", r.total.Load())
	}
	r.forget("other")
	if r.total.Load() != 0 || len(r.by) != 0 {
		t.Fatalf("after forgetting all: total %d, sessions %d", r.total.Load(), len(r.by))
	}
}

// A delivery's key read from the store is data: one that does not parse,
// or that outKey would not make again byte for byte, is refused, and
// never panics.
func FuzzOutKey(f *testing.F) {
	f.Add(outKey(releasePrefix, "client", 65535, resendKey{filter: "t/#", origin: message.NodeID{1, 2}, id: 7}))
	f.Add(outKey(sentPrefix, "", 1, resendKey{}))
	f.Add("qos2rel/63/0/00/1/74")
	f.Add("qos2out/63/1/0001/1/74")
	f.Add("qos2rel/63/01/00000000000000000000000000000000/1/74")
	f.Add("qos2/63/1")
	f.Fuzz(func(t *testing.T, key string) {
		released, client, id, k, err := parseOutKey(key)
		if err != nil {
			return
		}
		if id == 0 {
			t.Fatalf("%q: packet identifier 0 taken", key)
		}
		prefix := sentPrefix
		if released {
			prefix = releasePrefix
		}
		if again := outKey(prefix, client, id, k); again != key {
			t.Fatalf("%q parsed, made again as %q", key, again)
		}
	})
}
