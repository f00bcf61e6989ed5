package address

import (
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/petrelmq/petrel/message"
)

func mustConnectors(t *testing.T, s string) Connectors {
	t.Helper()
	c, err := ParseConnectors(s)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestSourceString(t *testing.T) {
	for s, want := range map[Source]string{SourceStatic: "static", SourceDiscovered: "discovered", 0: "source(0)"} {
		if got := s.String(); got != want {
			t.Errorf("Source(%d).String() = %q, want %q", int(s), got, want)
		}
	}
}

func TestDirectory(t *testing.T) {
	seen := time.Date(2025, 11, 29, 13, 0, 0, 0, time.UTC)
	hub1 := mustConnectors(t, "tcp://hub-1:7400")
	hub2 := mustConnectors(t, "failover:(tcp://hub-2a:7400,tcp://hub-2b:7400)")
	announced := mustConnectors(t, "tcp://10.0.0.5:7400")
	id := message.NodeID{1, 2, 3}

	d := NewDirectory()
	d.Heard(Entry{Name: "hub-1", ID: message.NodeID{9}, Connectors: announced}, seen)
	d.Heard(Entry{Name: "plant-3", ID: id, Connectors: announced}, seen)
	d.SetStatic([]Entry{
		{Name: "hub-2", Connectors: hub2},
		// SetStatic overrides Source and LastSeen.
		{Name: "hub-1", Connectors: hub1, Source: SourceDiscovered, LastSeen: seen},
		// No name: skipped.
		{Name: "", Connectors: hub1},
	})

	tests := []struct {
		name string
		want Entry
		ok   bool
	}{
		{"hub-1", Entry{Name: "hub-1", Connectors: hub1, Source: SourceStatic}, true}, // static wins
		{"hub-2", Entry{Name: "hub-2", Connectors: hub2, Source: SourceStatic}, true},
		{"plant-3", Entry{Name: "plant-3", ID: id, Connectors: announced, Source: SourceDiscovered, LastSeen: seen}, true},
		{"plant-4", Entry{}, false},
		{"", Entry{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := d.Lookup(tt.name)
			if ok != tt.ok || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Lookup(%q) = %+v, %v; want %+v, %v", tt.name, got, ok, tt.want, tt.ok)
			}
		})
	}
	var names []string
	for _, e := range d.Entries() {
		names = append(names, e.Name+"/"+e.Source.String())
	}
	if want := []string{"hub-1/static", "hub-2/static", "plant-3/discovered"}; !reflect.DeepEqual(names, want) {
		t.Errorf("Entries() = %q, want %q", names, want)
	}

	// SetStatic replaces: hub-1 falls back to what was discovered.
	d.SetStatic(nil)
	if e, _ := d.Lookup("hub-1"); e.Source != SourceDiscovered {
		t.Errorf("after SetStatic(nil), Lookup(hub-1) = %+v, want the discovered entry", e)
	}
	if _, ok := d.Lookup("hub-2"); ok {
		t.Error("after SetStatic(nil), hub-2 is still known")
	}
}

// TestDirectoryCopies checks that callers and the directory do not share
// connector lists or parameter maps.
func TestDirectoryCopies(t *testing.T) {
	c := mustConnectors(t, "static:(tls://a:1?ca=x,tcp://b:2)")
	in := []Entry{{Name: "n", Connectors: c}}
	d := NewDirectory()
	d.SetStatic(in)
	in[0].Connectors.List[0].Params["ca"] = "changed"
	in[0].Connectors.List[1].Addr = "changed:1"

	got, _ := d.Lookup("n")
	if s := got.Connectors.String(); s != "static:(tls://a:1?ca=x,tcp://b:2)" {
		t.Fatalf("directory saw the caller's change: %s", s)
	}
	got.Connectors.List[0].Params["ca"] = "changed"
	d.Entries()[0].Connectors.List[1].Addr = "changed:1"
	if again, _ := d.Lookup("n"); again.Connectors.String() != "static:(tls://a:1?ca=x,tcp://b:2)" {
		t.Fatalf("caller changed the directory: %s", again.Connectors)
	}
}

// TestDirectoryConcurrent runs readers beside a writer; -race checks it.
func TestDirectoryConcurrent(t *testing.T) {
	d := NewDirectory()
	c := mustConnectors(t, "tcp://a:1?x=y")
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				switch i {
				case 0:
					d.SetStatic([]Entry{{Name: "a", Connectors: c}, {Name: "b", Connectors: c}})
					continue
				case 1:
					d.Heard(Entry{Name: "a", ID: message.NodeID{1}, Connectors: c}, time.Now())
					d.Expire(time.Now())
					continue
				}
				if e, ok := d.Lookup("a"); ok {
					_ = e.Connectors.String()
				}
				for _, e := range d.Entries() {
					_ = e.Connectors.String()
				}
				_ = d.All()
				_ = d.Changed()

			}
		}()
	}
	wg.Wait()
}

// TestDirectoryDiscovered drives Heard and Expire with a fake clock.
func TestDirectoryDiscovered(t *testing.T) {
	t0 := time.Date(2025, 11, 29, 13, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	a, b := message.NodeID{0xa}, message.NodeID{0xb}
	ca, cb := mustConnectors(t, "tcp://10.0.0.1:7400"), mustConnectors(t, "tcp://10.0.0.2:7400")

	d := NewDirectory()
	d.SetTimeout(5 * time.Second)
	if !d.Heard(Entry{Name: "plant", ID: a, Connectors: ca, Source: SourceStatic}, at(0)) {
		t.Fatal("first Heard did not report a new node")
	}
	if d.Heard(Entry{Name: "plant", ID: a, Connectors: ca}, at(2*time.Second)) {
		t.Fatal("second Heard reported a new node")
	}
	// Ignored: no name, zero id.
	d.Heard(Entry{Name: "", ID: b, Connectors: cb}, at(0))
	d.Heard(Entry{Name: "zero", Connectors: cb}, at(0))
	if all := d.All(); len(all) != 1 {
		t.Fatalf("All = %v, want plant only", all)
	}
	e, _ := d.Lookup("plant")
	if want := (Entry{Name: "plant", ID: a, Connectors: ca, Source: SourceDiscovered, LastSeen: at(2 * time.Second)}); !reflect.DeepEqual(e, want) {
		t.Fatalf("Lookup = %v, want %v", entryString(e), entryString(want))
	}

	// Another node claims the same name (a restart with a new data
	// directory, say): Lookup takes the one heard last.
	d.Heard(Entry{Name: "plant", ID: b, Connectors: cb}, at(3*time.Second))
	if e, _ := d.Lookup("plant"); e.ID != b {
		t.Fatalf("Lookup = %v, want the fresher node b", entryString(e))
	}
	if got := d.Entries(); len(got) != 1 || got[0].ID != b {
		t.Fatalf("Entries = %v, want b only", got)
	}
	if got := d.All(); len(got) != 2 || got[0].ID != a || got[1].ID != b {
		t.Fatalf("All = %v, want a and b", got)
	}

	// a was heard at 2s: it goes at 7s, not before.
	if gone := d.Expire(at(7*time.Second - 1)); len(gone) != 0 {
		t.Fatalf("Expire before the timeout removed %v", gone)
	}
	if gone := d.Expire(at(7 * time.Second)); len(gone) != 1 || gone[0].ID != a {
		t.Fatalf("Expire at the timeout removed %v, want a", gone)
	}
	// Heard again after expiry: new again.
	if !d.Heard(Entry{Name: "plant", ID: a, Connectors: ca}, at(8*time.Second)) {
		t.Fatal("a node heard after it expired is not new")
	}
	if e, _ := d.Lookup("plant"); e.ID != a {
		t.Fatalf("Lookup = %v, want a, heard last", entryString(e))
	}
	gone := d.Expire(at(time.Hour))
	if len(gone) != 2 || len(d.All()) != 0 {
		t.Fatalf("Expire(later) removed %v, left %v", gone, d.All())
	}
}

// TestDirectoryFresherTie: two nodes heard at the same instant are ordered
// by id, not by map order.
func TestDirectoryFresherTie(t *testing.T) {
	now := time.Unix(1, 0)
	for range 20 {
		d := NewDirectory()
		d.Heard(Entry{Name: "n", ID: message.NodeID{2}, Connectors: mustConnectors(t, "tcp://b:1")}, now)
		d.Heard(Entry{Name: "n", ID: message.NodeID{1}, Connectors: mustConnectors(t, "tcp://a:1")}, now)
		if e, _ := d.Lookup("n"); e.ID != (message.NodeID{1}) {
			t.Fatalf("Lookup = %v, want the smaller id", entryString(e))
		}
	}
}

func TestDirectoryChanged(t *testing.T) {
	now := time.Unix(1, 0)
	id := message.NodeID{1}
	d := NewDirectory()
	closed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	steps := []struct {
		name   string
		do     func()
		change bool
	}{
		{"new node", func() { d.Heard(Entry{Name: "n", ID: id, Connectors: mustConnectors(t, "tcp://a:1")}, now) }, true},
		{"refresh", func() {
			d.Heard(Entry{Name: "n", ID: id, Connectors: mustConnectors(t, "tcp://a:1")}, now.Add(time.Second))
		}, false},
		{"new connectors", func() { d.Heard(Entry{Name: "n", ID: id, Connectors: mustConnectors(t, "tcp://a:2")}, now) }, true},
		{"renamed", func() { d.Heard(Entry{Name: "m", ID: id, Connectors: mustConnectors(t, "tcp://a:2")}, now) }, true},
		{"nothing expires", func() { d.Expire(now) }, false},
		{"static", func() { d.SetStatic(nil) }, true},
		{"expired", func() { d.Expire(now.Add(time.Hour)) }, true},
	}
	for _, s := range steps {
		ch := d.Changed()
		s.do()
		if closed(ch) != s.change {
			t.Errorf("%s: changed = %v, want %v", s.name, !s.change, s.change)
		}
	}
}

func TestDirectorySetTimeoutDefault(t *testing.T) {
	d := NewDirectory()
	d.SetTimeout(0)
	now := time.Unix(100, 0)
	d.Heard(Entry{Name: "n", ID: message.NodeID{1}, Connectors: mustConnectors(t, "tcp://a:1")}, now)
	if gone := d.Expire(now.Add(DefaultTimeout - 1)); len(gone) != 0 {
		t.Fatal("SetTimeout(0) did not restore the default")
	}
	if gone := d.Expire(now.Add(DefaultTimeout)); len(gone) != 1 {
		t.Fatal("not expired at the default timeout")
	}
}

// TestDirectoryMaxDiscovered: past the bound, new nodes are dropped and
// counted, known ones keep refreshing, and room returns as they expire.
func TestDirectoryMaxDiscovered(t *testing.T) {
	t0 := time.Date(2025, 11, 29, 13, 0, 0, 0, time.UTC)
	cs := mustConnectors(t, "tcp://10.0.0.1:7400")
	d := NewDirectory()
	d.SetTimeout(5 * time.Second)
	d.SetMaxDiscovered(2)
	for i := byte(1); i <= 2; i++ {
		if !d.Heard(Entry{Name: "n", ID: message.NodeID{i}, Connectors: cs}, t0) {
			t.Fatalf("node %d under the bound not added", i)
		}
	}
	if d.Heard(Entry{Name: "n3", ID: message.NodeID{3}, Connectors: cs}, t0) || d.Full() != 1 || d.Discovered() != 2 {
		t.Fatalf("a third node past a bound of 2: full %d, %d held", d.Full(), d.Discovered())
	}
	// Node 1 refreshes; node 2 goes silent and expires.
	d.Heard(Entry{Name: "n", ID: message.NodeID{1}, Connectors: cs}, t0.Add(3*time.Second))
	if gone := d.Expire(t0.Add(5 * time.Second)); len(gone) != 1 || gone[0].ID != (message.NodeID{2}) {
		t.Fatalf("expired %v, want node 2 only", gone)
	}
	if !d.Heard(Entry{Name: "n3", ID: message.NodeID{3}, Connectors: cs}, t0.Add(5*time.Second)) {
		t.Fatal("a new node not added once room returned")
	}
}

// TestDirectorySilent: a discovered node that Expire forgets is silent
// until it is heard again; the silent are at most the bound of discovered
// nodes, the longest silent going first; a node never heard is not silent.
func TestDirectorySilent(t *testing.T) {
	d := NewDirectory()
	d.SetMaxDiscovered(2)
	now := time.Now()
	c := mustConnectors(t, "tcp://a:1")
	d.Heard(Entry{Name: "a", ID: message.NodeID{1}, Connectors: c}, now)
	if d.Silent("a") || d.Silent("nobody") {
		t.Fatal("silent before any expiry")
	}
	d.Expire(now.Add(DefaultTimeout))
	if !d.Silent("a") {
		t.Fatal("a forgotten by Expire is not silent")
	}
	d.Heard(Entry{Name: "a", ID: message.NodeID{1}, Connectors: c}, now.Add(DefaultTimeout))
	if d.Silent("a") {
		t.Fatal("a heard again is still silent")
	}
	d = NewDirectory()
	d.SetMaxDiscovered(2)
	for i, name := range []string{"x", "y", "z"} {
		at := now.Add(time.Duration(i) * time.Hour)
		d.Heard(Entry{Name: name, ID: message.NodeID{byte(10 + i)}, Connectors: c}, at)
		d.Expire(at.Add(DefaultTimeout))
	}
	if d.Silent("x") || !d.Silent("y") || !d.Silent("z") {
		t.Fatalf("past the bound of 2: x %v y %v z %v, want the longest silent (x) forgotten", d.Silent("x"), d.Silent("y"), d.Silent("z"))
	}
}

// TestDirectoryStale: while a node's entry lives, an announcement whose
// sequence is not greater than the one the entry was taken from (a replay
// of the latest or of an older one, or one without a sequence) neither
// changes the entry nor refreshes it, nor closes Changed.
func TestDirectoryStale(t *testing.T) {
	t0 := time.Date(2025, 11, 29, 13, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	id := message.NodeID{0xa}
	oldAddr, newAddr := mustConnectors(t, "tcp://10.0.0.1:7400"), mustConnectors(t, "tcp://10.0.0.1:7401")

	d := NewDirectory()
	d.SetTimeout(5 * time.Second)
	d.Heard(Entry{Name: "plant", ID: id, Connectors: oldAddr, Seq: 100}, at(0))
	d.Heard(Entry{Name: "plant", ID: id, Connectors: newAddr, Seq: 200}, at(time.Second))
	want := Entry{Name: "plant", ID: id, Connectors: newAddr, Source: SourceDiscovered, LastSeen: at(time.Second), Seq: 200}

	changed := d.Changed()
	for i, seq := range []uint64{100, 200, 199, 0, 1} {
		for j := range 50 {
			now := at(time.Second + time.Duration(i*50+j)*10*time.Millisecond)
			if _, _, stale := d.heard(Entry{Name: "plant", ID: id, Connectors: oldAddr, Seq: seq}, now); !stale {
				t.Fatalf("sequence %d after 200 is not stale", seq)
			}
		}
		if e, _ := d.Lookup("plant"); !reflect.DeepEqual(e, want) {
			t.Fatalf("after replays of sequence %d Lookup = %+v, want %+v", seq, e, want)
		}
	}
	select {
	case <-changed:
		t.Fatal("a stale announcement closed Changed")
	default:
	}
	// Refused announcements did not refresh it: it expires 5s after 1s.
	if gone := d.Expire(at(6 * time.Second)); len(gone) != 1 {
		t.Fatalf("Expire removed %v, want the entry replays did not keep alive", gone)
	}

	// A greater sequence is taken.
	d.Heard(Entry{Name: "plant", ID: id, Connectors: newAddr, Seq: 200}, at(7*time.Second))
	if _, _, stale := d.heard(Entry{Name: "plant", ID: id, Connectors: oldAddr, Seq: 201}, at(8*time.Second)); stale {
		t.Fatal("a greater sequence is stale")
	}
	if e, _ := d.Lookup("plant"); e.Seq != 201 || e.Connectors.String() != oldAddr.String() {
		t.Fatalf("Lookup = %+v, want sequence 201", e)
	}
}

// TestDirectoryStaleAfterExpiry: once the entry's timeout has passed, any
// announcement is taken again, whether or not Expire has removed the
// entry yet: a node whose clock stepped back across a restart is ignored
// for at most one timeout.
func TestDirectoryStaleAfterExpiry(t *testing.T) {
	t0 := time.Date(2025, 11, 29, 13, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	id := message.NodeID{0xa}
	before, after := mustConnectors(t, "tcp://10.0.0.1:7400"), mustConnectors(t, "tcp://10.0.0.1:7401")

	d := NewDirectory()
	d.SetTimeout(5 * time.Second)
	d.Heard(Entry{Name: "plant", ID: id, Connectors: before, Seq: 1000}, at(0))
	// Restarted with its clock set back: smaller sequences, ignored while
	// the old entry lives.
	if _, _, stale := d.heard(Entry{Name: "plant", ID: id, Connectors: after, Seq: 500}, at(5*time.Second-1)); !stale {
		t.Fatal("a smaller sequence was taken while the entry lived")
	}
	// At the timeout, before Expire runs: taken.
	if _, _, stale := d.heard(Entry{Name: "plant", ID: id, Connectors: after, Seq: 501}, at(5*time.Second)); stale {
		t.Fatal("a smaller sequence was refused after the entry's timeout")
	}
	if e, _ := d.Lookup("plant"); e.Seq != 501 || e.Connectors.String() != after.String() {
		t.Fatalf("Lookup = %+v, want sequence 501", e)
	}
	// After Expire removed it: any announcement is new again.
	d.Expire(at(time.Hour))
	if !d.Heard(Entry{Name: "plant", ID: id, Connectors: before, Seq: 3}, at(time.Hour)) {
		t.Fatal("an announcement after the entry expired is not new")
	}
	// Without a sequence after one with: refused while the entry lives.
	if _, _, stale := d.heard(Entry{Name: "plant", ID: id, Connectors: after}, at(time.Hour+time.Second)); !stale {
		t.Fatal("an announcement without a sequence replaced one with")
	}
	// Without a sequence on both sides: taken, as before sequences.
	d.Expire(at(2 * time.Hour))
	d.Heard(Entry{Name: "plant", ID: id, Connectors: before}, at(2*time.Hour))
	if _, _, stale := d.heard(Entry{Name: "plant", ID: id, Connectors: after}, at(2*time.Hour+time.Second)); stale {
		t.Fatal("an announcement without a sequence after one without is stale")
	}
}

// TestDirectoryIncarnations: the packets of two runs of one node arrive
// interleaved, in either order; the entry ends with the later run's
// connectors, and none of the earlier run's packets after the first of the
// later one moves it back.
func TestDirectoryIncarnations(t *testing.T) {
	t0 := time.Date(2025, 11, 29, 13, 0, 0, 0, time.UTC)
	id := message.NodeID{0xa}
	first, second := mustConnectors(t, "tcp://10.0.0.1:7400"), mustConnectors(t, "tcp://10.0.0.1:7401")
	type pkt struct {
		c   Connectors
		seq uint64
	}
	for _, order := range [][]pkt{
		{{first, 100}, {second, 200}, {first, 101}, {second, 201}, {first, 102}},
		{{second, 200}, {first, 100}, {first, 101}, {second, 201}, {first, 102}},
		{{first, 100}, {first, 101}, {second, 200}, {first, 102}, {first, 101}},
	} {
		d := NewDirectory()
		for i, p := range order {
			d.Heard(Entry{Name: "plant", ID: id, Connectors: p.c, Seq: p.seq}, t0.Add(time.Duration(i)*time.Second))
			if e, _ := d.Lookup("plant"); p.seq >= 200 && e.Connectors.String() != second.String() {
				t.Fatalf("after %v: %v, want the second run's", order[:i+1], e.Connectors)
			}
		}
		if e, _ := d.Lookup("plant"); e.Connectors.String() != second.String() {
			t.Fatalf("after %v: %v, want the second run's", order, e.Connectors)
		}
	}
}

// TestDirectoryFresherSeq: of two ids with one name that both announce a
// sequence, Lookup takes the greater sequence, not the one heard last: a
// replayed announcement of an id the node no longer uses does not take its
// name back.
func TestDirectoryFresherSeq(t *testing.T) {
	now := time.Unix(1, 0)
	d := NewDirectory()
	d.Heard(Entry{Name: "n", ID: message.NodeID{2}, Connectors: mustConnectors(t, "tcp://new:1"), Seq: 200}, now)
	d.Heard(Entry{Name: "n", ID: message.NodeID{1}, Connectors: mustConnectors(t, "tcp://old:1"), Seq: 100}, now.Add(time.Second))
	if e, _ := d.Lookup("n"); e.ID != (message.NodeID{2}) {
		t.Fatalf("Lookup = %v, want the greater sequence", entryString(e))
	}
	if got := d.Entries(); len(got) != 1 || got[0].ID != (message.NodeID{2}) {
		t.Fatalf("Entries = %v, want the greater sequence", got)
	}
}
