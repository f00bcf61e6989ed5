package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync/atomic"
	"time"

	petrel "github.com/petrelmq/petrel"
)

// demoStep is one stage of the demo. Steps run in order, each under a
// printed heading, and share the demo's state; the first error ends the
// demo. Keeping them as a list lets later stages (more nodes, a relay) slot
// in without touching the runner.
type demoStep struct {
	name string
	run  func(ctx context.Context, d *demo) error
}

// demo is the state the steps share.
type demo struct {
	out io.Writer
	log *slog.Logger
	// dir is the temporary directory that holds every node's data.
	dir   string
	nodes []*petrel.Node
	// received holds every body any consumer got, to check afterwards that
	// no expired message was among them.
	received []string
	checks   int
	// relay holds the nodes of the relay steps.
	relay *relayDemo
	// closing silences the nodes' warnings once the steps are done: with
	// topic interest, links run both ways between the relay's nodes, and
	// each node closing is a lost peer for the others' links.
	closing atomic.Bool
}

// quietHandler drops every record once *off is set.
type quietHandler struct {
	slog.Handler
	off *atomic.Bool
}

func (h quietHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return !h.off.Load() && h.Handler.Enabled(ctx, l)
}

func (h quietHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return quietHandler{h.Handler.WithAttrs(as), h.off}
}

func (h quietHandler) WithGroup(name string) slog.Handler {
	return quietHandler{h.Handler.WithGroup(name), h.off}
}

// demoTimeout bounds every wait in the demo, so that a regression makes it
// fail with a reason instead of hanging.
const demoTimeout = 5 * time.Second

// fileTimeout bounds the wait for the demo's file to cross the relay.
const fileTimeout = 60 * time.Second

// Run runs the demo: every step in order, each under a printed heading,
// its narrative and checks on out and the nodes' warnings on errOut. It
// returns the first failed check or error, after closing the nodes and
// removing their data.
func Run(ctx context.Context, out, errOut io.Writer) (err error) {
	dir, err := os.MkdirTemp("", "petrel-demo-*")
	if err != nil {
		return fmt.Errorf("make demo directory: %w", err)
	}
	d := &demo{out: out, dir: dir}
	d.log = slog.New(quietHandler{slog.NewTextHandler(errOut, &slog.HandlerOptions{Level: slog.LevelWarn}), &d.closing})
	defer func() { err = errors.Join(err, d.cleanup()) }()

	steps := demoSteps()
	for i, s := range steps {
		fmt.Fprintf(out, "\n== %d/%d %s ==\n", i+1, len(steps), s.name)
		if err := s.run(ctx, d); err != nil {
			return fmt.Errorf("demo step %q: %w", s.name, err)
		}
	}
	fmt.Fprintf(out, "\ndemo passed: %d checks\n", d.checks)
	return nil
}

// cleanup closes the nodes before removing their data, since a store must
// not lose its files while open.
func (d *demo) cleanup() error {
	d.closing.Store(true)
	var errs []error
	// Newest first: senders stop before the nodes they send to, so no link
	// reports its peer going away.
	for _, n := range slices.Backward(d.nodes) {
		if err := n.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close node %s: %w", n.Name(), err))
		}
	}
	if err := os.RemoveAll(d.dir); err != nil {
		errs = append(errs, fmt.Errorf("remove demo directory: %w", err))
	}
	return errors.Join(errs...)
}

// check records one claim of the demo: printed when it holds, returned as
// the error that ends the demo when it does not, with detail saying what
// was seen instead.
func (d *demo) check(ok bool, claim, detail string) error {
	if !ok {
		return fmt.Errorf("check failed: %s: %s", claim, detail)
	}
	d.checks++
	fmt.Fprintf(d.out, "  check ok: %s\n", claim)
	return nil
}

// printf writes one indented line of the demo's narrative.
func (d *demo) printf(format string, args ...any) {
	fmt.Fprintf(d.out, "  "+format+"\n", args...)
}

// waitFor polls cond until it holds or demoTimeout passes. The queue's
// counters move after asynchronous commits, so a check reads them this way
// rather than once.
func waitFor(ctx context.Context, cond func() bool) bool {
	ctx, cancel := context.WithTimeout(ctx, demoTimeout)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return cond()
		case <-tick.C:
		}
	}
	return true
}
