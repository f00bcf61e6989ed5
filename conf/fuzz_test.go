package conf

import (
	"errors"
	"io/fs"
	"os"
	"testing"

	"github.com/petrelmq/petrel/address"
	"github.com/petrelmq/petrel/message"
)

// FuzzParse checks that no input makes Parse panic or hang, that every error
// is an *Error wrapping ErrInvalid, and that whatever Parse accepts is
// something the node can start with: the node's own Validate accepts it.
// The seed corpus in testdata/fuzz/FuzzParse holds the example file, one
// document per rule, alias and merge shapes, and link configurations.
func FuzzParse(f *testing.F) {
	if data, err := os.ReadFile("example.yaml"); err == nil {
		f.Add(data)
	}
	// secret_file reads no real file under the fuzzer: one path exists.
	old := readSecretFile
	readSecretFile = func(path string) ([]byte, error) {
		if path == "fuzz-secret" {
			return []byte("s3cret\n"), nil
		}
		return nil, fs.ErrNotExist
	}
	f.Cleanup(func() { readSecretFile = old })
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
		for _, n := range file.Nodes {
			if _, err := address.ParseConnectors(n.Connector.String()); err != nil {
				t.Fatalf("accepted node %q with a connector that does not print back: %v", n.Name, err)
			}
		}
		k := file.Link
		if k.Window < 0 || k.MaxFrame < 0 || k.HandshakeTimeout < 0 || k.WriteTimeout < 0 || k.IdleTimeout < 0 ||
			k.ReconnectMin < 0 || k.ReconnectMax < 0 {
			t.Fatalf("accepted a negative link setting: %+v", k)
		}
		if file.SecretFile != "" && file.Secret != "s3cret" {
			t.Fatalf("secret_file %q accepted without its secret", file.SecretFile)
		}
		if err := file.NodeConfig().Validate(); err != nil {
			t.Fatalf("accepted a configuration the node refuses: %v", err)
		}
	})
}
