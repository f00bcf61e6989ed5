package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	petrel "github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/nodeproc"
)

// An agent (`petrel bench agent ...`) runs one node of a multi-process
// bench: the runners here and the cross-process tests start agents as
// child processes and read what they print. The CLI registers the hidden
// commands; the work is here.
//
// What an agent prints on stdout, one line each, written whole:
//
//	ready node=<name> id=<id> data_dir=<dir> [listen=<host:port>] pid=<pid>
//	attempt <key>                     produce --keys-log: before the send is submitted
//	ok <key>                          produce --keys-log: once the send is durable
//	{"event":"produced",...}          produce: every send durable
//	{"event":"drained",...}           produce --wait-drained: every send queue empty
//	{"event":"consumed",...}          consume: every message received and acked
//
// After its work an agent keeps its node open until stdin closes or it gets
// SIGINT or SIGTERM, so the process that started it decides when it ends
// (and can read its memory first). Closing stdin or a signal during the
// work stops it too, with exit status 1.

// sentNsProperty is the application property that carries a message's
// submit time, in Unix nanoseconds, for end-to-end latency.
const sentNsProperty = "sent_ns"

// agent is an open node and the stdout of the agent that runs it.
type agent struct {
	node *petrel.Node
	out  *lineWriter
	// readyAt is when the node was open: listening, and consumable.
	readyAt time.Time
}

// OpenFunc opens the node of an agent. The CLI gives one that reads the
// agent's configuration file; its errors are returned unchanged.
type OpenFunc func(ctx context.Context) (*petrel.Node, error)

// openAgent opens the node with open and prints its ready line.
func openAgent(ctx context.Context, open OpenFunc, stdout io.Writer) (*agent, error) {
	node, err := open(ctx)
	if err != nil {
		return nil, err
	}
	a := &agent{node: node, out: &lineWriter{w: stdout}, readyAt: time.Now()}
	if err := a.out.line(readyLine(node)); err != nil {
		node.Close()
		return nil, err
	}
	return a, nil
}

// readyLine is `petrel node`'s ready line, with the pid added.
func readyLine(node *petrel.Node) string {
	dataDir, err := filepath.Abs(node.DataDir())
	if err != nil {
		dataDir = node.DataDir()
	}
	line := fmt.Sprintf("ready node=%s id=%s data_dir=%s", node.Name(), node.ID(), nodeproc.QuoteValue(dataDir))
	if addr := node.ListenAddr(); addr != "" {
		line += " listen=" + addr
	}
	return line + fmt.Sprintf(" pid=%d", os.Getpid())
}

// event prints one JSON event line.
func (a *agent) event(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return a.out.line(string(b))
}

// close closes the node, keeping err if there was one.
func (a *agent) close(err error) error {
	if cerr := a.node.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("close node: %w", cerr)
	}
	return err
}

// agentContext returns a context that ends on SIGINT or SIGTERM, or when
// stdin reaches its end: the parent closing the pipe (or dying) stops the
// agent. The goroutine that reads stdin ends with it; an agent runs as its
// own process, so that is at exit at the latest.
func agentContext(parent context.Context, stdin io.Reader) (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		io.Copy(io.Discard, stdin)
		cancel()
	}()
	return ctx, func() { cancel(); stop() }
}

// interrupted wraps an error of work cut short by the end of the agent's
// context, so the exit status says why.
func interrupted(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("interrupted (stdin closed or signal) before the work was done: %w", err)
	}
	return err
}

// lineWriter writes whole lines, each with one Write, so that lines from
// several goroutines never interleave and each reaches the pipe at once
// (an agent killed with SIGKILL has lost no line it printed).
type lineWriter struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
}

func (l *lineWriter) line(s string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(append(l.buf[:0], s...), '\n')
	_, err := l.w.Write(l.buf)
	return err
}
