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
	// Discovery is not built yet; the test plays its part.
	d.discovered["hub-1"] = Entry{Name: "hub-1", ID: id, Connectors: announced, Source: SourceDiscovered, LastSeen: seen}
	d.discovered["plant-3"] = Entry{Name: "plant-3", ID: id, Connectors: announced, Source: SourceDiscovered, LastSeen: seen}
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
				if i == 0 {
					d.SetStatic([]Entry{{Name: "a", Connectors: c}, {Name: "b", Connectors: c}})
					continue
				}
				if e, ok := d.Lookup("a"); ok {
					_ = e.Connectors.String()
				}
				for _, e := range d.Entries() {
					_ = e.Connectors.String()
				}
			}
		}()
	}
	wg.Wait()
}
