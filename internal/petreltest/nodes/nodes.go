// Package nodes opens petrel nodes and clients for tests: one opener, Open,
// whose t.Cleanup checks the node's invariants when the test ends, and one
// Dial. It imports the root package, so the root's internal tests (package
// petrel) cannot use it; the external ones (package petrel_test) and the
// command's tests do.
package nodes

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/petrelmq/petrel"
)

// Quiet is a logger that drops everything: tests read state, not logs.
var Quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// FastLinks makes links reconnect quickly, so that a test whose peer comes
// back does not wait for the production backoff.
var FastLinks = petrel.LinkConfig{ReconnectMin: 10 * time.Millisecond, ReconnectMax: 200 * time.Millisecond}

// DefaultName is the name of a node opened without Name.
const DefaultName = "plant-7"

// Option changes how Open opens a node.
type Option func(*settings)

type settings struct {
	cfg             petrel.Config
	mods            []func(*petrel.Config)
	leasesMayRemain bool
}

// Name names the node; without it the node is DefaultName.
func Name(name string) Option { return func(s *settings) { s.cfg.Name = name } }

// Listen makes the node accept links and clients on addr ("127.0.0.1:0"
// for any free port). Without it the node accepts none.
func Listen(addr string) Option { return func(s *settings) { s.cfg.Listen = addr } }

// With changes the configuration after the other options applied; several
// apply in order, and nil is ignored.
func With(mod func(*petrel.Config)) Option {
	return func(s *settings) {
		if mod != nil {
			s.mods = append(s.mods, mod)
		}
	}
}

// LeasesMayRemain turns off the check that nothing is left in flight when
// the test ends, for a test that leaves a delivery unsettled on purpose (a
// lease that must time out, a consumer that dies holding messages). The
// store's counters and the partial files are still checked.
func LeasesMayRemain() Option { return func(s *settings) { s.leasesMayRemain = true } }

// Open opens a node in a new directory under t.TempDir(), with FastLinks
// and the Quiet logger, then the options. The node is closed when the test
// ends, after its invariants are checked (see the check functions):
//   - before it closes, nothing is in flight on any queue (unless
//     LeasesMayRemain), within a few seconds for what closing clients and
//     links give back;
//   - after it closed, each queue's stored depth and bytes equal its rows;
//   - no partial or temporary file lies outside the spool.
//
// A test that already failed is not checked: what it left half-way would
// only bury its own failure.
func Open(t testing.TB, opts ...Option) *petrel.Node {
	t.Helper()
	s := settings{cfg: petrel.Config{Name: DefaultName, DataDir: t.TempDir(), Logger: Quiet, Link: FastLinks}}
	for _, o := range opts {
		o(&s)
	}
	for _, mod := range s.mods {
		mod(&s.cfg)
	}
	n, err := petrel.Open(context.Background(), s.cfg)
	if err != nil {
		t.Fatalf("open node %s: %v", s.cfg.Name, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			n.Close()
			return
		}
		if !s.leasesMayRemain {
			checkLeases(t, n)
		}
		if err := n.Close(); err != nil {
			t.Errorf("close node %s: %v", s.cfg.Name, err)
		}
		checkStore(t, s.cfg)
		checkPartials(t, s.cfg)
	})
	return n
}

// Dial connects a client to n, named app-1 unless opts names it, with the
// Quiet logger and quick reconnects, over TLS when opts carries a TLS
// configuration. The client is closed when the test ends, before n (whose
// cleanup was registered first).
func Dial(t testing.TB, n *petrel.Node, opts petrel.DialOptions) *petrel.Client {
	t.Helper()
	if opts.Name == "" {
		opts.Name = "app-1"
	}
	opts.Logger = Quiet
	opts.ReconnectMin, opts.ReconnectMax = 10*time.Millisecond, 100*time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	scheme := "tcp://"
	if opts.TLS != nil {
		scheme = "tls://"
	}
	c, err := petrel.Dial(ctx, scheme+n.ListenAddr(), opts)
	if err != nil {
		t.Fatalf("dial %s: %v", n.ListenAddr(), err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TCP is the connector URL of n's listener.
func TCP(n *petrel.Node) string { return "tcp://" + n.ListenAddr() }
