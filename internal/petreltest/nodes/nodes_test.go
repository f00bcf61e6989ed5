package nodes

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// recorder is a testing.TB whose cleanups run when the test says and
// whose errors are recorded, so that the checks of Open can be checked.
type recorder struct {
	testing.TB
	cleanups []func()
	errs     []string
}

func (r *recorder) Helper()                   {}
func (r *recorder) Cleanup(f func())          { r.cleanups = append(r.cleanups, f) }
func (r *recorder) Failed() bool              { return len(r.errs) > 0 }
func (r *recorder) Errorf(f string, a ...any) { r.errs = append(r.errs, fmt.Sprintf(f, a...)) }

// end runs the cleanups, last first, as testing does.
func (r *recorder) end() string {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
	return strings.Join(r.errs, "\n")
}

func TestOpenChecksNothingOnACleanNode(t *testing.T) {
	r := &recorder{TB: t}
	n := Open(r, Name("clean"))
	p := n.Producer()
	if err := p.Send(context.Background(), p.CreateDataMessage("orders")); err != nil {
		t.Fatal(err)
	}
	c, err := n.Consumer("orders")
	if err != nil {
		t.Fatal(err)
	}
	d, err := c.Poll()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Ack(); err != nil {
		t.Fatal(err)
	}
	if errs := r.end(); errs != "" {
		t.Fatalf("a node left clean was reported: %s", errs)
	}
}

// A delivery left unsettled and a partial file in the received folder are
// both reported when the test ends; LeasesMayRemain silences the first
// only.
func TestOpenReportsLeasesAndPartialFiles(t *testing.T) {
	for _, mayRemain := range []bool{false, true} {
		t.Run(fmt.Sprint("leases may remain ", mayRemain), func(t *testing.T) {
			r := &recorder{TB: t}
			opts := []Option{Name("sloppy")}
			if mayRemain {
				opts = append(opts, LeasesMayRemain())
			}
			n := Open(r, opts...)
			p := n.Producer()
			if err := p.Send(context.Background(), p.CreateDataMessage("orders")); err != nil {
				t.Fatal(err)
			}
			c, err := n.Consumer("orders")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Poll(); err != nil {
				t.Fatal(err)
			}
			received := filepath.Join(n.DataDir(), "received", "files")
			if err := os.MkdirAll(received, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(received, "half.bin.part"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			// In the spool a partial file is a resumable transfer, not a leak.
			if err := os.WriteFile(filepath.Join(n.DataDir(), "spool", "0123.part"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			errs := r.end()
			if got := strings.Contains(errs, "orders: 1 in flight"); got == mayRemain {
				t.Errorf("lease reported %v with LeasesMayRemain %v: %s", got, mayRemain, errs)
			}
			if !strings.Contains(errs, "half.bin.part") || strings.Contains(errs, "0123.part") {
				t.Errorf("partial files: %s", errs)
			}
		})
	}
}
