package queue

import (
	"strings"
	"testing"

	"github.com/petrelmq/petrel/message"
)

// The copies of one publish decode their shared body once; each
// Delivery.Message is still the consumer's own: changing its properties
// or body shows in no other copy's.
func TestSharedCopiesDecodeOnceStayIndependent(t *testing.T) {
	s, path := openTemp(t, nil)
	a, b, c := mustQueue(t, s, "a", KindReceive), mustQueue(t, s, "b", KindReceive), mustQueue(t, s, "c", KindReceive)
	m := msg(4, "body")
	m.Properties.Set("k", message.String("v"))
	putShared(t, m, a, b, c)

	da, err := a.Poll()
	if err != nil {
		t.Fatal(err)
	}
	ma, err := da.Message()
	if err != nil {
		t.Fatal(err)
	}
	tmpl := da.sh.msg.Load()
	if tmpl == nil || tmpl == ma {
		t.Fatalf("first decode kept %p and returned %p: want a kept message that is not handed out", tmpl, ma)
	}
	ma.Properties.Set("k", message.String("changed"))
	ma.Properties.Set("added", message.Int32(1))
	ma.Body[0] = 'X'

	for i, q := range []*Queue{b, c} {
		d, err := q.Poll()
		if err != nil {
			t.Fatal(err)
		}
		if d.sh != da.sh {
			t.Fatalf("%s: copy does not share its body's decode", q.Name())
		}
		got := new(message.Message)
		if i == 0 {
			got, err = d.Message()
		} else {
			err = d.MessageTo(got)
		}
		if err != nil {
			t.Fatal(err)
		}
		if v, _ := got.Properties.Get("k"); v.Str() != "v" || len(got.Properties) != 1 || string(got.Body) != "body" {
			t.Fatalf("%s: %v %q; want the published properties and body", q.Name(), got.Properties, got.Body)
		}
		if got.ID != m.ID || got.Destination != m.Destination || got.Priority != 4 {
			t.Fatalf("%s: header %+v", q.Name(), got)
		}
		got.Body[1] = 'Y'
		if err := d.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	if v, _ := tmpl.Properties.Get("k"); v.Str() != "v" || string(tmpl.Body) != "body" {
		t.Fatalf("the kept decode changed: %v %q", tmpl.Properties, tmpl.Body)
	}
	if err := da.Ack(); err != nil {
		t.Fatal(err)
	}
	wantTables(t, s, 0, 0, 0)
	closeAndCheck(t, s, path)
}

// The body cache charges a body's decoded message when it is made, and
// stays within its budget with decoded bodies in it; freed bodies take
// their whole charge with them.
func TestBodyCacheChargesDecoded(t *testing.T) {
	s, path := openTemp(t, func(c *Config) { c.PrefetchMessages = 16; c.PrefetchBytes = 1 << 10 })
	a, b := mustQueue(t, s, "a", KindReceive), mustQueue(t, s, "b", KindReceive)
	want := bodies(strings.Repeat("x", 100), 100)
	for _, body := range want {
		putShared(t, msg(4, body), a, b)
	}
	settle(t, s)
	cacheBytes := func() (int, int) {
		s.bodies.mu.Lock()
		defer s.bodies.mu.Unlock()
		sum := 0
		for _, d := range s.bodies.m {
			sum += d.charge
		}
		if sum != s.bodies.bytes {
			t.Fatalf("cache counts %d bytes, its bodies' charges sum to %d", s.bodies.bytes, sum)
		}
		return s.bodies.bytes, len(s.bodies.m)
	}
	before, n := cacheBytes()
	if n == 0 {
		t.Fatal("cache holds no body")
	}
	// Decoding a's copies charges every cached body for its decode; the
	// cache then keeps fewer bodies, within its budget.
	var ds []*Delivery
	for range want {
		d, err := a.Poll()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.Message(); err != nil {
			t.Fatal(err)
		}
		ds = append(ds, d)
		if got, _ := cacheBytes(); got > s.bodies.max {
			t.Fatalf("cache holds %d bytes, budget %d", got, s.bodies.max)
		}
	}
	s.bodies.mu.Lock()
	for _, d := range s.bodies.m {
		if d.msg.Load() != nil && d.charge != 2*len(d.data)+bodyOverhead+decodedOverhead {
			t.Errorf("decoded body %d charged %d", d.id, d.charge)
		}
	}
	s.bodies.mu.Unlock()
	if after, _ := cacheBytes(); after == 0 || before == 0 {
		t.Fatalf("cache held %d then %d bytes", before, after)
	}
	if err := a.AckAll(ds); err != nil {
		t.Fatal(err)
	}
	if got := drain(t, b); len(got) != len(want) {
		t.Fatalf("b: %d messages, want %d", len(got), len(want))
	}
	wantTables(t, s, 0, 0, 0)
	if got, n := cacheBytes(); got != 0 || n != 0 {
		t.Fatalf("cache holds %d bodies, %d bytes, once all were freed", n, got)
	}
	closeAndCheck(t, s, path)
}
