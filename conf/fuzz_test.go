package conf

import (
	"errors"
	"os"
	"testing"

	"github.com/petrelmq/petrel/message"
)

// FuzzParse checks that no input makes Parse panic or hang, that every error
// is an *Error wrapping ErrInvalid, and that whatever Parse accepts is
// something the node can start with. The seed corpus in
// testdata/fuzz/FuzzParse holds the example file, one document per rule, and
// alias and merge shapes.
func FuzzParse(f *testing.F) {
	if data, err := os.ReadFile("example.yaml"); err == nil {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse("fuzz.yaml", data)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v (%T) is not an *Error wrapping ErrInvalid", err, err)
			}
			if e.Line < 0 || e.Column < 0 || e.Reason == "" {
				t.Fatalf("error without a usable position or reason: %#v", e)
			}
			return
		}
		if err := message.ValidName(file.Node.Name); err != nil {
			t.Fatalf("accepted node name: %v", err)
		}
		if file.Node.DataDir == "" || file.AutoCreate == nil {
			t.Fatalf("defaults not filled: %+v", file)
		}
		seen := make(map[string]bool)
		for _, a := range file.Addresses {
			if err := message.ValidName(a.Name); err != nil {
				t.Fatalf("accepted address name: %v", err)
			}
			if seen[a.Name] {
				t.Fatalf("accepted address %q twice", a.Name)
			}
			seen[a.Name] = true
			if a.MaxDeliveries < 0 || a.LeaseTimeout < 0 || a.RedeliveryDelay < 0 || a.MaxRedeliveryDelay < 0 {
				t.Fatalf("accepted a negative policy: %+v", a)
			}
		}
		s := file.Store
		if s.MaxBytes < 0 || s.MaxMessages < 0 || s.DedupeWindow < 0 || s.DedupeMaxEntries < 0 ||
			s.SweepInterval < 0 || s.PrefetchMessages < 0 || s.PrefetchBytes < 0 {
			t.Fatalf("accepted a negative store setting: %+v", s)
		}
		l := file.Limits
		if l.MaxBody < 0 || l.MaxProperties < 0 || l.MaxPropertyBytes < 0 || l.MaxHeaderString < 0 {
			t.Fatalf("accepted a negative limit: %+v", l)
		}
		_ = file.NodeConfig()
	})
}
