package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/petrelmq/petrel"
)

// figurer is a bench result that prints as figures, and as JSON.
type figurer interface{ figures() []figure }

// procBench is what the benches that run petrel processes share: where the
// binary and the bench directory are, and the two lives of a run.
type procBench struct {
	name    string // "link", "client", "file": for messages and the directory
	parent  string // folder for the bench directory; "" = the system's temp folder
	keep    bool   // keep the bench directory
	timeout time.Duration
	json    bool
}

// run finds the petrel binary, makes the bench directory, bounds the run
// by the timeout and prints the result. run gets ctx, which ends on the
// timeout or SIGINT, and life, which ends only when run has returned:
// processes live on life, so that they outlive a timeout long enough to
// be stopped cleanly, and are killed if they still run after that.
func (b procBench) run(ctx context.Context, stdout, stderr io.Writer,
	run func(ctx, life context.Context, exe, dir string) (figurer, error)) (err error) {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find the petrel binary to run the nodes: %w", err)
	}
	dir, err := os.MkdirTemp(b.parent, "petrel-bench-"+b.name+"-*")
	if err != nil {
		return fmt.Errorf("make bench directory: %w", err)
	}
	if b.keep {
		fmt.Fprintf(stderr, "bench directory %s (kept)\n", dir)
	} else {
		defer func() { err = errors.Join(err, os.RemoveAll(dir)) }()
	}
	life, killAll := context.WithCancel(context.WithoutCancel(ctx))
	defer killAll()
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	res, err := run(ctx, life, exe, dir)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("bench %s gave up after --timeout %v: %w", b.name, b.timeout, err)
		}
		return err
	}
	if b.json {
		return writeJSON(stdout, res)
	}
	return writeFigures(stdout, res.figures())
}

// nodeBench is what the benches that run one embedded node share: its data
// directory, its configuration, the timeout and how the result prints.
type nodeBench struct {
	dataDir string // "" = a temporary directory, removed after the run
	config  petrel.Config
	timeout time.Duration
	json    bool
}

// run opens the node in the bench's data directory, bounds measure by the
// timeout, prints its result, and closes the node. The node logs its
// warnings to stderr.
func (b nodeBench) run(ctx context.Context, stdout, stderr io.Writer,
	measure func(ctx context.Context, node *petrel.Node) (figurer, error)) (err error) {
	dir, cleanup, err := benchDataDir(b.dataDir)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, cleanup()) }()
	cfg := b.config
	cfg.Name, cfg.DataDir = "bench", dir
	cfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	node, err := petrel.Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := node.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("close node: %w", cerr))
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	res, err := measure(ctx, node)
	if err != nil {
		return err
	}
	if b.json {
		return writeJSON(stdout, res)
	}
	return writeFigures(stdout, res.figures())
}

// rounds runs round n times, each in a directory of its own under dir,
// removed before the next round: the next round's baselines must not
// meet this one's files in the page cache or in the disk's queue.
func rounds[T any](dir string, n int, progress io.Writer, round func(dir string) (*T, error)) ([]*T, error) {
	out := make([]*T, 0, n)
	for i := range n {
		fmt.Fprintf(progress, "round %d of %d\n", i+1, n)
		rd := filepath.Join(dir, fmt.Sprintf("run-%d", i+1))
		if err := os.Mkdir(rd, 0o755); err != nil {
			return nil, err
		}
		res, err := round(rd)
		if err != nil {
			return nil, fmt.Errorf("round %d: %w", i+1, err)
		}
		out = append(out, res)
		if err := os.RemoveAll(rd); err != nil {
			return nil, err
		}
	}
	return out, nil
}
