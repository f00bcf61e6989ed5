package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/petrelmq/petrel/internal/nodeproc"
)

// procRun is the node processes of one run of a multi-process bench, and
// the directory that holds their configurations, data and stderr. Every
// bench that runs petrel processes (link, client, file) starts and stops
// its nodes through one.
type procRun struct {
	exe, dir string
	// sync is the store sync mode written into every node's configuration.
	sync     string
	progress io.Writer
	procs    map[string]*nodeproc.Proc
	// life kills the nodes when it ends, a safety net: stopAll stops
	// them first, cleanly, whatever happened.
	life context.Context
	// died ends the context of the run's waits when a node ends before
	// stopAll; the other nodes are then stopped as usual.
	died     context.CancelCauseFunc
	stopping atomic.Bool
}

// newProcRun returns the run of a bench whose nodes run exe in dir, with
// the store sync mode sync, and report progress to progress. The nodes are
// killed when life ends.
func newProcRun(life context.Context, exe, dir, sync string, progress io.Writer) *procRun {
	return &procRun{exe: exe, dir: dir, sync: sync, progress: progress, procs: map[string]*nodeproc.Proc{}, life: life}
}

const (
	// readyTimeout bounds a node's start, up to its ready line.
	readyTimeout = time.Minute
	// stopGrace is how long a node may take to stop after SIGTERM before
	// it is killed: a clean stop commits and closes the store.
	stopGrace = 30 * time.Second
)

// fileFor writes the configuration of node f.Name, with its data directory
// in the run's directory, and returns its path.
func (r *procRun) fileFor(f nodeproc.NodeFile) (string, error) {
	f.DataDir = filepath.Join(r.dir, f.Name)
	f.Sync = r.sync
	f.ReconnectMin, f.ReconnectMax = 10*time.Millisecond, 100*time.Millisecond
	path := filepath.Join(r.dir, f.Name+".yaml")
	return path, f.Write(path)
}

// start runs `petrel args...` as node name and waits for its ready line.
// A node that fails to get ready is killed and not kept; once ready, its
// end before stopAll fails the run at once (r.died).
func (r *procRun) start(ctx context.Context, name string, args ...string) (*nodeproc.Proc, nodeproc.ReadyInfo, error) {
	p, err := nodeproc.Start(r.life, name, r.exe, filepath.Join(r.dir, name+".stderr"), args...)
	if err != nil {
		return nil, nodeproc.ReadyInfo{}, err
	}
	rctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	info, err := p.WaitReady(rctx)
	if err != nil {
		p.Kill()
		return nil, nodeproc.ReadyInfo{}, err
	}
	r.procs[name] = p
	go func() {
		<-p.Exited()
		if !r.stopping.Load() {
			r.died(p.ExitError("ended during the bench"))
		}
	}()
	listen := ""
	if info.Listen != "" {
		listen = " on " + info.Listen
	}
	fmt.Fprintf(r.progress, "%s ready%s, pid %d: petrel %s\n", name, listen, p.Pid(), joinArgs(args))
	return p, info, nil
}

// startListening starts a node that listens on 127.0.0.1:port, or on a
// free port if port is 0; args makes its command line from its listen
// address. It tries again while the port turns out taken.
func (r *procRun) startListening(ctx context.Context, name string, port int, args func(listen string) ([]string, error)) (*nodeproc.Proc, nodeproc.ReadyInfo, error) {
	return nodeproc.StartRetryingPort(ctx, 5, func() (*nodeproc.Proc, nodeproc.ReadyInfo, error) {
		p := port
		if p == 0 {
			var err error
			if p, err = nodeproc.FreePort(); err != nil {
				return nil, nodeproc.ReadyInfo{}, err
			}
		}
		a, err := args(net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			return nil, nodeproc.ReadyInfo{}, err
		}
		return r.start(ctx, name, a...)
	})
}

// stopAll stops every node. After a failed run only a node that had to be
// killed is worth a word: the others' ends (an agent interrupted before
// its work was done, a node whose end failed the run) add nothing.
func (r *procRun) stopAll(runFailed bool) error {
	r.stopping.Store(true)
	ps := make([]*nodeproc.Proc, 0, len(r.procs))
	for _, p := range r.procs {
		ps = append(ps, p)
	}
	errs := nodeproc.StopEach(stopGrace, ps...)
	if runFailed {
		for i, err := range errs {
			if !errors.Is(err, nodeproc.ErrStopTimeout) {
				errs[i] = nil
			}
		}
	}
	return errors.Join(errs...)
}

// rss returns each node's peak RSS: what it reported of itself, or what
// /proc says of it now if that is more.
func (r *procRun) rss(reported map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for name, p := range r.procs {
		v := reported[name]
		if m, err := p.PeakRSSMB(); err == nil {
			v = max(v, m)
		}
		out[name] = round(v, 2)
	}
	return out
}

// stopped stops every process of r after the run, so that a node that
// stops badly (a race report, a failed close) fails the bench, and joins
// that to the run's error.
func (r *procRun) stopped(err error) error {
	if serr := r.stopAll(err != nil); serr != nil {
		err = errors.Join(err, fmt.Errorf("stop the nodes: %w", serr))
	}
	return err
}

// joinArgs formats a command line for progress lines.
func joinArgs(args []string) string { return strings.Join(args, " ") }
