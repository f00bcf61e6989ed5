package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"
)

// linkRun is one run of `bench link`: its directory and its node
// processes, a (producer), b (consumer) and c (relay, with --hops 2).
type linkRun struct {
	o        linkOptions
	exe, dir string
	progress io.Writer
	procs    map[string]*proc
	// life kills the nodes when it ends, a safety net: stopAll stops
	// them first, cleanly, whatever happened.
	life context.Context
	// died ends the context of the run's waits when a node ends before
	// stopAll; the other nodes are then stopped as usual.
	died     context.CancelCauseFunc
	stopping atomic.Bool
}

const (
	// readyTimeout bounds a node's start, up to its ready line.
	readyTimeout = time.Minute
	// stopGrace is how long a node may take to stop after SIGTERM before
	// it is killed: a clean stop commits and closes the store.
	stopGrace = 30 * time.Second
	// urgentKey starts the body of the backlog's priority-9 message.
	urgentKey = "urgent"
)

// fileFor writes the configuration of node f.Name, with its data directory
// in the run's directory, and returns its path.
func (r *linkRun) fileFor(f nodeFile) (string, error) {
	f.DataDir = filepath.Join(r.dir, f.Name)
	f.Sync = r.o.sync
	f.ReconnectMin, f.ReconnectMax = 10*time.Millisecond, 100*time.Millisecond
	path := filepath.Join(r.dir, f.Name+".yaml")
	return path, f.write(path)
}

// start runs `petrel args...` as node name and waits for its ready line.
// A node that fails to get ready is killed and not kept; once ready, its
// end before stopAll fails the run at once (r.died).
func (r *linkRun) start(ctx context.Context, name string, args ...string) (*proc, readyInfo, error) {
	p, err := startProc(r.life, name, r.exe, filepath.Join(r.dir, name+".stderr"), args...)
	if err != nil {
		return nil, readyInfo{}, err
	}
	rctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	info, err := p.waitReady(rctx)
	if err != nil {
		p.kill()
		return nil, readyInfo{}, err
	}
	r.procs[name] = p
	go func() {
		<-p.exited
		if !r.stopping.Load() {
			r.died(p.exitError("ended during the bench"))
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
func (r *linkRun) startListening(ctx context.Context, name string, port int, args func(listen string) ([]string, error)) (*proc, readyInfo, error) {
	return startRetryingPort(ctx, 5, func() (*proc, readyInfo, error) {
		p := port
		if p == 0 {
			var err error
			if p, err = freePort(); err != nil {
				return nil, readyInfo{}, err
			}
		}
		a, err := args(net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			return nil, readyInfo{}, err
		}
		return r.start(ctx, name, a...)
	})
}

// stopAll stops every node. After a failed run only a node that had to be
// killed is worth a word: the others' ends (an agent interrupted before
// its work was done, a node whose end failed the run) add nothing.
func (r *linkRun) stopAll(runFailed bool) error {
	r.stopping.Store(true)
	ps := make([]*proc, 0, len(r.procs))
	for _, p := range r.procs {
		ps = append(ps, p)
	}
	errs := stopEach(stopGrace, ps...)
	if runFailed {
		for i, err := range errs {
			if !errors.Is(err, errStopTimeout) {
				errs[i] = nil
			}
		}
	}
	return errors.Join(errs...)
}

// rss returns each node's peak RSS: what it reported of itself, or what
// /proc says of it now if that is more.
func (r *linkRun) rss(reported map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for name, p := range r.procs {
		v := reported[name]
		if m, err := p.peakRSSMB(); err == nil {
			v = max(v, m)
		}
		out[name] = round(v, 2)
	}
	return out
}

// startRelay starts c, which relays the bench address to b at bAddr, and
// returns the address c listens on.
func (r *linkRun) startRelay(ctx context.Context, bAddr string) (string, error) {
	_, info, err := r.startListening(ctx, "c", 0, func(listen string) ([]string, error) {
		cfg, err := r.fileFor(nodeFile{Name: "c", Listen: listen,
			Nodes: [][2]string{{"b", "tcp://" + bAddr}}, Relay: []string{benchAddr}})
		return []string{"node", "-c", cfg}, err
	})
	return info.Listen, err
}

// startProducer starts a, sending to bench@b through hop (b, or c with
// --hops 2) with the given extra flags.
func (r *linkRun) startProducer(ctx context.Context, hop string, extra ...string) (*proc, error) {
	f := nodeFile{Name: "a", Nodes: [][2]string{{"b", "tcp://" + hop}}}
	if r.o.hops == 2 {
		f.Nodes = [][2]string{{"c", "tcp://" + hop}}
		f.Routes = [][2]string{{"b", "c"}}
	}
	cfg, err := r.fileFor(f)
	if err != nil {
		return nil, err
	}
	args := []string{"bench", "agent", "produce", "-c", cfg, "--to", benchAddr + "@b",
		"--messages", strconv.Itoa(r.o.messages), "--size", strconv.Itoa(r.o.size),
		"--window", strconv.Itoa(r.o.window), "--rate", strconv.FormatFloat(r.o.rate, 'f', -1, 64)}
	a, _, err := r.start(ctx, "a", append(args, extra...)...)
	return a, err
}

// startConsumer starts b, listening on port (0: any free one), to receive
// n messages.
func (r *linkRun) startConsumer(ctx context.Context, port, n int, extra ...string) (*proc, readyInfo, error) {
	return r.startListening(ctx, "b", port, func(listen string) ([]string, error) {
		cfg, err := r.fileFor(nodeFile{Name: "b", Listen: listen, Receive: []string{benchAddr}})
		args := []string{"bench", "agent", "consume", "-c", cfg, "--from", benchAddr, "--messages", strconv.Itoa(n)}
		return append(args, extra...), err
	})
}

// runLink is the steady scenario: b, then c, then a, and the messages
// flow as a sends them.
func (r *linkRun) runLink(ctx context.Context) (*linkResult, error) {
	b, bInfo, err := r.startConsumer(ctx, 0, r.o.messages)
	if err != nil {
		return nil, err
	}
	hop := bInfo.Listen
	if r.o.hops == 2 {
		if hop, err = r.startRelay(ctx, hop); err != nil {
			return nil, err
		}
	}
	a, err := r.startProducer(ctx, hop)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(r.progress, "sending %d messages...\n", r.o.messages)
	var prod producedEvent
	if err := a.waitEvent(ctx, "produced", &prod); err != nil {
		return nil, err
	}
	var cons consumedEvent
	if err := b.waitEvent(ctx, "consumed", &cons); err != nil {
		return nil, err
	}
	elapsed := time.Duration(cons.LastNs - prod.StartNs)
	res := &linkResult{
		linkFigures: r.base("link", r.rss(map[string]float64{"a": prod.PeakRSSMB, "b": cons.PeakRSSMB})),
		P50ms:       cons.P50ms, P99ms: cons.P99ms, MaxMs: cons.MaxMs,
	}
	res.MsgsPerSec = round(rate(int64(r.o.messages), elapsed), 2)
	res.EnqueueMsgsPerSec = round(rate(int64(prod.Count), time.Duration(prod.DurableNs-prod.StartNs)), 2)
	res.ElapsedSeconds = round(elapsed.Seconds(), 3)
	return res, nil
}

// runBacklog is the backlog scenario: with b down, a queues the messages
// and one urgent message; then b starts and drains them.
func (r *linkRun) runBacklog(ctx context.Context) (*backlogResult, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	bAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	hop := bAddr
	if r.o.hops == 2 {
		if hop, err = r.startRelay(ctx, bAddr); err != nil {
			return nil, err
		}
	}
	extra := []string{"--then-urgent", urgentKey}
	if r.o.hops == 2 {
		extra = append(extra, "--wait-drained") // the backlog moves on to c
	}
	a, err := r.startProducer(ctx, hop, extra...)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(r.progress, "queueing %d messages with b down...\n", r.o.messages)
	var prod producedEvent
	if err := a.waitEvent(ctx, "produced", &prod); err != nil {
		return nil, err
	}
	queuedRSS := prod.PeakRSSMB
	if r.o.hops == 2 {
		fmt.Fprintf(r.progress, "waiting for the backlog to move from a to c...\n")
		var dr drainedEvent
		if err := a.waitEvent(ctx, "drained", &dr); err != nil {
			return nil, err
		}
	}
	b, _, err := r.startConsumer(ctx, port, r.o.messages+1, "--urgent-key", urgentKey)
	if err != nil {
		return nil, err
	}
	var cons consumedEvent
	if err := b.waitEvent(ctx, "consumed", &cons); err != nil {
		return nil, err
	}
	return r.backlogResult(prod, cons, queuedRSS)
}

func (r *linkRun) backlogResult(prod producedEvent, cons consumedEvent, queuedRSS float64) (*backlogResult, error) {
	if cons.UrgentNs == 0 {
		return nil, errors.New("b received every message but none starting with " + urgentKey + ": the priority-9 message was lost")
	}
	elapsed := time.Duration(cons.LastNs - cons.ReadyNs)
	res := &backlogResult{
		linkFigures: r.base("link-backlog", r.rss(map[string]float64{"a": prod.PeakRSSMB, "b": cons.PeakRSSMB})),
		UrgentMs:    round(ms(time.Duration(cons.UrgentNs-cons.ReadyNs)), 3),
		UrgentIndex: cons.UrgentIndex,
		QueuedRSSMB: queuedRSS,
	}
	res.MsgsPerSec = round(rate(int64(r.o.messages+1), elapsed), 2)
	res.EnqueueMsgsPerSec = round(rate(int64(prod.Count), time.Duration(prod.DurableNs-prod.StartNs)), 2)
	res.ElapsedSeconds = round(elapsed.Seconds(), 3)
	return res, nil
}
