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

// The body cache charges a body's decoded message to a budget of its
// own, beside the bytes budget, which decoding does not touch: past it,
// the oldest decoded messages are dropped, not bodies. Freed bodies take
// their charges with them.
func TestBodyCacheChargesDecoded(t *testing.T) {
	s, path := openTemp(t, func(c *Config) { c.PrefetchMessages = 16; c.PrefetchBytes = 1 << 13 })
	a, b := mustQueue(t, s, "a", KindReceive), mustQueue(t, s, "b", KindReceive)
	want := bodies(strings.Repeat("x", 100), 100)
	for _, body := range want {
		putShared(t, msg(4, body), a, b)
	}
	settle(t, s)
	c := s.bodies
	// charges checks the counts against the bodies' charges and returns
	// the bytes, the decoded bytes, the bodies and the decoded ones.
	charges := func() (bytes, dbytes, n, decoded int) {
		c.mu.Lock()
		defer c.mu.Unlock()
		var sum, dsum int
		for _, d := range c.m {
			sum += d.charge
			dsum += d.dcharge
			if d.dcharge > 0 {
				decoded++
				if d.msg.Load() == nil || d.dcharge != len(d.data)+decodedOverhead {
					t.Fatalf("body %d charged %d for a decoded message %p", d.id, d.dcharge, d.msg.Load())
				}
			}
		}
		if sum != c.bytes || dsum != c.dbytes {
			t.Fatalf("cache counts %d bytes and %d decoded; its bodies' charges sum to %d and %d", c.bytes, c.dbytes, sum, dsum)
		}
		if c.bytes > c.max || c.dbytes > c.dmax {
			t.Fatalf("cache holds %d bytes (budget %d), %d decoded (budget %d)", c.bytes, c.max, c.dbytes, c.dmax)
		}
		return c.bytes, c.dbytes, len(c.m), decoded
	}
	bytes0, _, n0, _ := charges()
	if n0 != len(want) {
		t.Fatalf("cache holds %d bodies, want all %d", n0, len(want))
	}
	perDecoded := len(msgData(t, want[0])) + decodedOverhead
	if fit := c.dmax / perDecoded; fit >= len(want) || fit == 0 {
		t.Fatalf("the decoded budget fits %d of %d: the test wants it to fit some", fit, len(want))
	}
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
		charges()
	}
	bytes1, dbytes1, n1, decoded1 := charges()
	if bytes1 != bytes0 || n1 != n0 {
		t.Fatalf("decoding changed the bodies kept: %d bytes, %d bodies; before %d, %d", bytes1, n1, bytes0, n0)
	}
	if decoded1 == 0 || decoded1 == len(want) || dbytes1 == 0 {
		t.Fatalf("%d decoded messages kept of %d, %d bytes: want the budget to keep the latest", decoded1, len(want), dbytes1)
	}
	// The oldest were dropped: a copy of the first body decodes again.
	if ds[0].sh.msg.Load() != nil || ds[len(ds)-1].sh.msg.Load() == nil {
		t.Fatal("want the first body's decoded message dropped and the last's kept")
	}
	if err := a.AckAll(ds); err != nil {
		t.Fatal(err)
	}
	if got := drain(t, b); len(got) != len(want) {
		t.Fatalf("b: %d messages, want %d", len(got), len(want))
	}
	wantTables(t, s, 0, 0, 0)
	if bytes, dbytes, n, _ := charges(); bytes != 0 || dbytes != 0 || n != 0 {
		t.Fatalf("cache holds %d bodies, %d bytes, %d decoded, once all were freed", n, bytes, dbytes)
	}
	closeAndCheck(t, s, path)
}

// msgData is the encoding of msg(4, body).
func msgData(t *testing.T, body string) []byte {
	t.Helper()
	data, err := msg(4, body).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return data
}
