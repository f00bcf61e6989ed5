package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	petrel "github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/nodeproc"
	"github.com/petrelmq/petrel/queue"
)

// Addr is the one address a local bench sends to and consumes from.
const Addr = "bench"

// LocalOptions are the flags of `bench local`.
type LocalOptions struct {
	Producers, Consumers, Messages, Size, Window, Prefill int
	// Sync is the store's sync mode as the config file spells it.
	Sync string
	// DataDir is the node's data directory, kept; "" for a temporary one.
	DataDir string
	JSON    bool
	Timeout time.Duration
	// AgainstNATS measures NATS JetStream too, with the same workload,
	// after the node's run; NATS names the nats-server binary ("" to look
	// it up).
	AgainstNATS bool
	NATS        string
}

// LocalResult is the JSON object of `bench local --json`. The field names
// are a contract with the scripts that compare runs: add, never rename.
type LocalResult struct {
	Scenario          string  `json:"scenario"`
	Messages          int     `json:"messages"`
	Size              int     `json:"size"`
	Sync              string  `json:"sync"`
	Producers         int     `json:"producers"`
	Consumers         int     `json:"consumers"`
	Window            int     `json:"window"`
	Prefill           int     `json:"prefill"`
	EnqueueMsgsPerSec float64 `json:"enqueue_msgs_per_sec"`
	MsgsPerSec        float64 `json:"msgs_per_sec"`
	Acked             int64   `json:"acked"`
	EnqueueSeconds    float64 `json:"enqueue_seconds"`
	ElapsedSeconds    float64 `json:"elapsed_seconds"`
	P50ms             float64 `json:"p50_ms"`
	P99ms             float64 `json:"p99_ms"`
	MaxMs             float64 `json:"max_ms"`
	PeakRSSMB         float64 `json:"peak_rss_mb"`
	CPUs              int     `json:"cpus"`
	GoVersion         string  `json:"go_version"`
	// With --against-nats: NATS JetStream's figures for the same workload
	// (its consumers consume while the producers publish), nats-server's
	// version, and enqueue_msgs_per_sec over NATS's publish rate,
	// msgs_per_sec over its consume rate.
	NATS                *NATSFigures `json:"nats,omitempty"`
	NATSVersion         string       `json:"nats_version,omitempty"`
	EnqueueRatioToNATS  float64      `json:"enqueue_ratio_to_nats,omitempty"`
	EndToEndRatioToNATS float64      `json:"end_to_end_ratio_to_nats,omitempty"`
}

// natsLocalConsumerWindow is what each NATS consumer pulls ahead beside
// bench local, whose consumers are goroutines of the node's process and
// have no window: the client bench's default.
const natsLocalConsumerWindow = 1000

func (o LocalOptions) validate() (queue.SyncMode, error) {
	for _, c := range []struct {
		flag string
		v    int
		min  int
	}{
		{"producers", o.Producers, 1}, {"consumers", o.Consumers, 1}, {"messages", o.Messages, 1},
		{"size", o.Size, 0}, {"window", o.Window, 1}, {"prefill", o.Prefill, 0},
	} {
		if c.v < c.min {
			return 0, usageErrorf("invalid argument %d for \"--%s\" flag: want at least %d", c.v, c.flag, c.min)
		}
	}
	if err := checkTimeout(o.Timeout); err != nil {
		return 0, err
	}
	return parseSync(o.Sync)
}

// RunLocal runs `bench local` on one embedded node. It prints the
// figures, or one JSON object with o.JSON, on stdout, and progress and the
// node's warnings on stderr.
func RunLocal(ctx context.Context, o LocalOptions, stdout, stderr io.Writer) (err error) {
	mode, err := o.validate()
	if err != nil {
		return err
	}
	var natsExe string
	if o.AgainstNATS {
		if natsExe, err = FindNATS(o.NATS); err != nil {
			return err
		}
	}
	b := nodeBench{dataDir: o.DataDir, timeout: o.Timeout, json: o.JSON,
		config: petrel.Config{Store: queue.Config{Sync: mode}}}
	return b.run(ctx, stdout, stderr, func(ctx context.Context, node *petrel.Node) (figurer, error) {
		// PETREL_CPUPROFILE profiles Petrel's run; NATS runs after it stops.
		stop, err := cpuProfile("local")
		if err != nil {
			return nil, err
		}
		res, err := measureLocal(ctx, node, o, stderr)
		if err := errors.Join(err, stop()); err != nil || natsExe == "" {
			return res, err
		}
		return res, res.againstNATS(ctx, natsExe, o, stderr)
	})
}

// againstNATS measures NATS JetStream with the workload of o, in a
// temporary directory, and sets r's NATS figures and ratios.
func (r *LocalResult) againstNATS(ctx context.Context, exe string, o LocalOptions, progress io.Writer) (err error) {
	dir, err := os.MkdirTemp("", "petrel-bench-nats-*")
	if err != nil {
		return fmt.Errorf("make nats directory: %w", err)
	}
	defer func() { err = errors.Join(err, os.RemoveAll(dir)) }()
	// The server outlives a timeout of ctx long enough to be stopped
	// cleanly, and is killed once this returns.
	life, kill := context.WithCancel(context.WithoutCancel(ctx))
	defer kill()
	w := natsWorkload{Producers: o.Producers, Window: o.Window, Messages: o.Messages, Size: o.Size,
		Consumers: o.Consumers, ConsumerWindow: natsLocalConsumerWindow, Concurrent: true}
	f, err := runNATS(ctx, life, exe, dir, w, progress)
	if err != nil {
		return err
	}
	r.NATS, r.NATSVersion = f, natsVersion(ctx, exe)
	r.EnqueueRatioToNATS = ratio(r.EnqueueMsgsPerSec, f.PublishMsgsPerSec)
	r.EndToEndRatioToNATS = ratio(r.MsgsPerSec, f.ConsumeMsgsPerSec)
	return nil
}

// benchDataDir returns the directory to run in and how to clean it up: a
// temporary directory is removed, one the user named is kept.
func benchDataDir(dir string) (string, func() error, error) {
	if dir != "" {
		return dir, func() error { return nil }, nil
	}
	tmp, err := os.MkdirTemp("", "petrel-bench-*")
	if err != nil {
		return "", nil, fmt.Errorf("make bench directory: %w", err)
	}
	return tmp, func() error { return os.RemoveAll(tmp) }, nil
}

// measureLocal runs the workload on node and returns its figures.
func measureLocal(ctx context.Context, node *petrel.Node, o LocalOptions, progress io.Writer) (*LocalResult, error) {
	c, err := node.Consumer(Addr)
	if err != nil {
		return nil, err
	}
	if s, _ := node.QueueStat(Addr); s.Depth > 0 {
		return nil, fmt.Errorf("address %q in the data directory already holds %d messages: use an empty directory", Addr, s.Depth)
	}
	p := node.Producer()
	body := make([]byte, o.Size)
	if o.Prefill > 0 {
		fmt.Fprintf(progress, "prefilling %d messages...\n", o.Prefill)
		start := time.Now()
		if _, err := sendAll(ctx, p, o.Prefill, o.Producers, o.Window, body, false); err != nil {
			return nil, fmt.Errorf("prefill: %w", err)
		}
		fmt.Fprintf(progress, "prefilled %d messages in %v\n", o.Prefill, time.Since(start).Round(time.Millisecond))
	}

	target := int64(o.Prefill + o.Messages)
	cg := startConsumers(ctx, c, o.Consumers, target)
	start := time.Now()
	sent, err := sendAll(ctx, p, o.Messages, o.Producers, o.Window, body, true)
	if err != nil {
		cg.stop()
		return nil, fmt.Errorf("send: %w", err)
	}
	acked, end, err := cg.wait()
	if err != nil {
		return nil, fmt.Errorf("consume: %w (acked %d of %d)", err, acked, target)
	}
	return o.result(sent, start, acked, end.Sub(start)), nil
}

// result assembles the figures of a finished run.
func (o LocalOptions) result(sent *sendResult, start time.Time, acked int64, elapsed time.Duration) *LocalResult {
	enqueue := sent.last.Sub(start)
	pct := sent.lat.percentiles(50, 99, 100)
	rss, err := nodeproc.PeakRSSMB()
	if err != nil {
		rss = 0 // reported as 0 where /proc is missing; the bench still stands
	}
	return &LocalResult{
		Scenario: "local", Messages: o.Messages, Size: o.Size, Sync: o.Sync,
		Producers: o.Producers, Consumers: o.Consumers, Window: o.Window, Prefill: o.Prefill,
		EnqueueMsgsPerSec: round(rate(int64(o.Messages), enqueue), 2),
		MsgsPerSec:        round(rate(acked, elapsed), 2),
		Acked:             acked,
		EnqueueSeconds:    round(enqueue.Seconds(), 3),
		ElapsedSeconds:    round(elapsed.Seconds(), 3),
		P50ms:             round(ms(pct[0]), 3),
		P99ms:             round(ms(pct[1]), 3),
		MaxMs:             round(ms(pct[2]), 3),
		PeakRSSMB:         round(rss, 2),
		CPUs:              runtime.NumCPU(),
		GoVersion:         runtime.Version(),
	}
}

func (r *LocalResult) figures() []figure {
	figs := []figure{
		{"scenario", fmt.Sprintf("local: %d producers (window %d), %d consumers, %d messages of %d B, sync %s, prefill %d",
			r.Producers, r.Window, r.Consumers, r.Messages, r.Size, r.Sync, r.Prefill)},
		{"enqueue", fmt.Sprintf("%.0f msgs/s (%d durable in %.3f s)", r.EnqueueMsgsPerSec, r.Messages, r.EnqueueSeconds)},
		{"end-to-end", fmt.Sprintf("%.0f msgs/s (%d acked in %.3f s)", r.MsgsPerSec, r.Acked, r.ElapsedSeconds)},
		{"send latency p50", fmt.Sprintf("%.3f ms", r.P50ms)},
		{"send latency p99", fmt.Sprintf("%.3f ms", r.P99ms)},
		{"send latency max", fmt.Sprintf("%.3f ms", r.MaxMs)},
		{"peak RSS", fmt.Sprintf("%.1f MiB", r.PeakRSSMB)},
	}
	if n := r.NATS; n != nil {
		figs = append(figs, n.lines()...)
		figs = append(figs,
			figure{"enqueue ratio to nats", fmt.Sprintf("%.2fx NATS JetStream async publish (same run)", r.EnqueueRatioToNATS)},
			figure{"end-to-end ratio to nats", fmt.Sprintf("%.2fx NATS JetStream consume beside its publish (same run)", r.EndToEndRatioToNATS)})
		if r.NATSVersion != "" {
			figs = append(figs, figure{"nats version", r.NATSVersion + natsVersionNote})
		}
	}
	return figs
}
