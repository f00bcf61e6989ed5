package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"time"

	petrel "github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/nodeproc"
)

// ClientOptions are the flags of `bench client`.
type ClientOptions struct {
	Producers, Consumers, Messages, Size, ConsumerWindow int
	// Window is the publishes in flight per producer, the node's
	// link.window too; WindowBytes the bytes they may hold. 0: the
	// defaults of petrel.DialOptions and of the node.
	Window      int
	WindowBytes int64
	// BaselineMessages bounds the local baseline's messages; 0 skips it.
	BaselineMessages int
	Sync             string
	JSON, Concurrent bool
	Timeout          time.Duration
	// AgainstNATS measures NATS JetStream too, with the same workload, in
	// the same invocation; NATS names the nats-server binary ("" to look
	// it up).
	AgainstNATS bool
	NATS        string
	// Runs is how many rounds the bench measures, each with its own
	// baselines, node and (with AgainstNATS) nats-server; 0 means 1.
	Runs int
}

// clientResult is the JSON object of `bench client --json`. The field
// names are a contract with the scripts that compare runs: add, never
// rename.
type clientResult struct {
	Scenario  string `json:"scenario"`
	Messages  int    `json:"messages"`
	Size      int    `json:"size"`
	Sync      string `json:"sync"`
	Producers int    `json:"producers"`
	Consumers int    `json:"consumers"`
	// Window is --window, 0 for the client's default; WindowBytes the
	// client's byte bound on its flight, and InFlight what the two allow
	// of this run's messages.
	Window         int   `json:"window"`
	WindowBytes    int64 `json:"window_bytes"`
	InFlight       int   `json:"in_flight"`
	ConsumerWindow int   `json:"consumer_window"`
	Concurrent     bool  `json:"concurrent"`
	// Publishing: first submit -> last publish acked durable by the
	// node; consuming: consumers start -> last ack sent (with --concurrent
	// they start with the producers).
	flowFigures
	// NodePeakRSSMB is the node process's VmHWM; ClientPeakRSSMB this
	// process's, which runs every client.
	NodePeakRSSMB   float64 `json:"node_peak_rss_mb"`
	ClientPeakRSSMB float64 `json:"client_peak_rss_mb"`
	NodePid         int     `json:"node_pid"`
	CPUs            int     `json:"cpus"`
	GoVersion       string  `json:"go_version"`
	// The baselines of the same invocation, and publish_msgs_per_sec over
	// the local one.
	baseline
	RatioToLocal float64 `json:"ratio_to_local"`
	// With --against-nats: NATS JetStream's figures for the same workload,
	// measured after the node stopped, nats-server's version, and
	// Petrel's rates over NATS's.
	NATS               *NATSFigures `json:"nats,omitempty"`
	NATSVersion        string       `json:"nats_version,omitempty"`
	PublishRatioToNATS float64      `json:"publish_ratio_to_nats,omitempty"`
	ConsumeRatioToNATS float64      `json:"consume_ratio_to_nats,omitempty"`
	// Runs is the rounds measured. With more than one, the rates, the
	// latencies, the baselines and the ratios above are the medians of
	// Rounds' (each ratio the median of the rounds' ratios, not a ratio
	// of medians), NATS's included; the memory and the pids are those of
	// the round whose publish_ratio_to_nats (ratio_to_local without
	// --against-nats) is the median, the lower middle one when the rounds
	// are even.
	Runs   int           `json:"runs"`
	Rounds []ClientRound `json:"rounds,omitempty"`
}

// ClientRound is one round of `bench client --runs`. The field names are
// those of the result's.
type ClientRound struct {
	PublishMsgsPerSec     float64 `json:"publish_msgs_per_sec"`
	ConsumeMsgsPerSec     float64 `json:"consume_msgs_per_sec"`
	P99ms                 float64 `json:"p99_ms"`
	LocalMsgsPerSec       float64 `json:"baseline_local_msgs_per_sec"`
	RatioToLocal          float64 `json:"ratio_to_local"`
	NATSPublishMsgsPerSec float64 `json:"nats_publish_msgs_per_sec,omitempty"`
	NATSConsumeMsgsPerSec float64 `json:"nats_consume_msgs_per_sec,omitempty"`
	PublishRatioToNATS    float64 `json:"publish_ratio_to_nats,omitempty"`
	ConsumeRatioToNATS    float64 `json:"consume_ratio_to_nats,omitempty"`
}

func (o ClientOptions) validate() error {
	for _, c := range []struct {
		flag   string
		v, min int
	}{
		{"producers", o.Producers, 1}, {"consumers", o.Consumers, 1}, {"messages", o.Messages, 1},
		{"size", o.Size, 0}, {"window", o.Window, 0}, {"consumer-window", o.ConsumerWindow, 1}, {"runs", o.Runs, 0},
	} {
		if c.v < c.min {
			return usageErrorf("invalid argument %d for \"--%s\" flag: want at least %d", c.v, c.flag, c.min)
		}
	}
	if o.WindowBytes < 0 {
		return usageErrorf("invalid argument %d for \"--window-bytes\" flag: want at least 0", o.WindowBytes)
	}
	if err := checkTimeout(o.Timeout); err != nil {
		return err
	}
	_, err := parseSync(o.Sync)
	return err
}

// encodedOverhead is about what a bench message's encoding adds to its
// body: destination, ids, timestamps, data type.
const encodedOverhead = 128

// dialWindow returns the client's window and byte bound of the run, the
// defaults' where unset, and the publishes in flight they allow per
// producer with this run's messages: what the NATS producers keep too.
func (o ClientOptions) dialWindow() (count int, bytes int64, inFlight int) {
	count, bytes = o.Window, o.WindowBytes
	if count <= 0 {
		count = petrel.DefaultClientWindow
	}
	if bytes <= 0 {
		bytes = petrel.DefaultClientWindowBytes
	}
	return count, bytes, int(max(1, min(int64(count), bytes/int64(o.Size+encodedOverhead))))
}

// RunClient runs `bench client`: a node process, and the clients of this
// process against it. It prints the figures, or one JSON object with
// o.JSON, on stdout, and progress on stderr.
func RunClient(ctx context.Context, o ClientOptions, stdout, stderr io.Writer) error {
	if err := o.validate(); err != nil {
		return err
	}
	var natsExe string
	if o.AgainstNATS {
		var err error
		if natsExe, err = FindNATS(o.NATS); err != nil {
			return err
		}
	}
	b := procBench{name: "client", timeout: o.Timeout, json: o.JSON}
	return b.run(ctx, stdout, stderr, func(ctx, life context.Context, exe, dir string) (figurer, error) {
		runs := max(o.Runs, 1)
		if runs == 1 {
			res, err := o.round(ctx, life, exe, dir, natsExe, stderr)
			if res != nil {
				res.Runs = 1
			}
			return res, err
		}
		rs, err := rounds(dir, runs, stderr, func(dir string) (*clientResult, error) {
			return o.round(ctx, life, exe, dir, natsExe, stderr)
		})
		if err != nil {
			return nil, err
		}
		return medianClient(rs), nil
	})
}

// round measures the baselines in dir, then the clients against a node
// of its own, then, with natsExe, NATS.
func (o ClientOptions) round(ctx, life context.Context, exe, dir, natsExe string, progress io.Writer) (*clientResult, error) {
	bl, err := measureBaseline(ctx, dir, o.Sync, o.Messages, o.BaselineMessages, o.Size, progress)
	if err != nil {
		return nil, err
	}
	r := newProcRun(life, exe, dir, o.Sync, progress)
	ctx, r.died = context.WithCancelCause(ctx)
	defer r.died(nil)
	res, err := runClients(ctx, r, o)
	if res != nil {
		res.baseline = bl
		res.RatioToLocal = ratio(res.PublishMsgsPerSec, bl.LocalMsgsPerSec)
	}
	if err := r.stopped(err); err != nil || natsExe == "" {
		return res, err
	}
	// NATS runs once the node has stopped, so that neither competes with
	// the other, and after this process measured its own peak RSS.
	_, _, inFlight := o.dialWindow()
	w := natsWorkload{Producers: o.Producers, Window: inFlight, Messages: o.Messages, Size: o.Size,
		Consumers: o.Consumers, ConsumerWindow: o.ConsumerWindow, Concurrent: o.Concurrent}
	nf, err := runNATS(ctx, life, natsExe, filepath.Join(dir, "nats"), w, progress)
	if err != nil {
		return nil, err
	}
	res.NATS, res.NATSVersion = nf, natsVersion(ctx, natsExe)
	res.PublishRatioToNATS = ratio(res.PublishMsgsPerSec, nf.PublishMsgsPerSec)
	res.ConsumeRatioToNATS = ratio(res.ConsumeMsgsPerSec, nf.ConsumeMsgsPerSec)
	return res, nil
}

// medianClient makes the result of several rounds: see clientResult.Runs.
func medianClient(rounds []*clientResult) *clientResult {
	res := *medianRound(rounds, func(r *clientResult) float64 {
		if r.NATS != nil {
			return r.PublishRatioToNATS
		}
		return r.RatioToLocal
	})
	type f = medianField[clientResult]
	// flow is the figures of one side, Petrel's or NATS's.
	flow := func(side func(*clientResult) *flowFigures) []f {
		return []f{
			{func(r *clientResult) *float64 { return &side(r).PublishMsgsPerSec }, 2},
			{func(r *clientResult) *float64 { return &side(r).ConsumeMsgsPerSec }, 2},
			{func(r *clientResult) *float64 { return &side(r).PublishSeconds }, 3},
			{func(r *clientResult) *float64 { return &side(r).ConsumeSeconds }, 3},
			{func(r *clientResult) *float64 { return &side(r).P50ms }, 3},
			{func(r *clientResult) *float64 { return &side(r).P99ms }, 3},
			{func(r *clientResult) *float64 { return &side(r).MaxMs }, 3},
		}
	}
	setMedians(&res, rounds, flow(func(r *clientResult) *flowFigures { return &r.flowFigures })...)
	setMedians(&res, rounds,
		f{func(r *clientResult) *float64 { return &r.LocalMsgsPerSec }, 2},
		f{func(r *clientResult) *float64 { return &r.FsyncP50us }, 1},
		f{func(r *clientResult) *float64 { return &r.RatioToLocal }, 3})
	if res.NATS != nil {
		// The median round's NATS figures are copied, not shared: the
		// medians go in the copy.
		nf := *res.NATS
		res.NATS = &nf
		setMedians(&res, rounds, flow(func(r *clientResult) *flowFigures { return &r.NATS.flowFigures })...)
		setMedians(&res, rounds,
			f{func(r *clientResult) *float64 { return &r.PublishRatioToNATS }, 3},
			f{func(r *clientResult) *float64 { return &r.ConsumeRatioToNATS }, 3})
	}
	res.Runs = len(rounds)
	res.Rounds = make([]ClientRound, len(rounds))
	for i, rd := range rounds {
		cr := ClientRound{
			PublishMsgsPerSec: rd.PublishMsgsPerSec, ConsumeMsgsPerSec: rd.ConsumeMsgsPerSec, P99ms: rd.P99ms,
			LocalMsgsPerSec: rd.LocalMsgsPerSec, RatioToLocal: rd.RatioToLocal,
		}
		if rd.NATS != nil {
			cr.NATSPublishMsgsPerSec, cr.NATSConsumeMsgsPerSec = rd.NATS.PublishMsgsPerSec, rd.NATS.ConsumeMsgsPerSec
			cr.PublishRatioToNATS, cr.ConsumeRatioToNATS = rd.PublishRatioToNATS, rd.ConsumeRatioToNATS
		}
		res.Rounds[i] = cr
	}
	return &res
}

// runClients starts the node and runs the clients against it.
func runClients(ctx context.Context, r *procRun, o ClientOptions) (*clientResult, error) {
	node, info, err := r.startListening(ctx, "node", 0, func(listen string) ([]string, error) {
		// The node's session window bounds what a producer has in flight;
		// with no --window, the node's defaults.
		cfg, err := r.fileFor(nodeproc.NodeFile{Name: "node", Listen: listen, Receive: []string{Addr}, Window: o.Window})
		return []string{"node", "-c", cfg}, err
	})
	if err != nil {
		return nil, err
	}
	// PETREL_CPUPROFILE=prefix profiles the clients of this process into
	// prefix.clients.pprof; the node, which inherits the variable, writes
	// prefix.node.pprof.
	stop, err := cpuProfile("clients")
	if err != nil {
		return nil, err
	}
	m, err := measureClients(ctx, "tcp://"+info.Listen, o, r.progress)
	if err := errors.Join(err, stop()); err != nil {
		return nil, err
	}
	res := o.result(m)
	res.NodePid = node.Pid()
	res.NodePeakRSSMB = r.rss(nil)["node"]
	return res, nil
}

// result assembles the figures of a finished run.
func (o ClientOptions) result(m *clientMeasure) *clientResult {
	rss, err := nodeproc.PeakRSSMB()
	if err != nil {
		rss = 0 // reported as 0 where /proc is missing
	}
	_, bytes, inFlight := o.dialWindow()
	r := &clientResult{
		Scenario: "client", Messages: o.Messages, Size: o.Size, Sync: o.Sync,
		Producers: o.Producers, Consumers: o.Consumers, Window: o.Window, WindowBytes: bytes, InFlight: inFlight,
		ConsumerWindow:  o.ConsumerWindow,
		Concurrent:      o.Concurrent,
		ClientPeakRSSMB: round(rss, 2),
		CPUs:            runtime.NumCPU(),
		GoVersion:       runtime.Version(),
	}
	r.setPublish(o.Messages, m.publish, m.lat)
	r.setConsume(o.Messages, m.consume)
	return r
}

func (r *clientResult) figures() []figure {
	mode := "publish, then consume"
	if r.Concurrent {
		mode = "publish and consume at once"
	}
	figs := []figure{
		{"scenario", fmt.Sprintf("client: %d producers (%s), %d consumers (window %d), %d messages of %d B, sync %s, %s",
			r.Producers, r.windowText(), r.Consumers, r.ConsumerWindow, r.Messages, r.Size, r.Sync, mode)},
		{"publish", fmt.Sprintf("%.0f msgs/s (%d durable at the node in %.3f s)", r.PublishMsgsPerSec, r.Messages, r.PublishSeconds)},
		{"consume", fmt.Sprintf("%.0f msgs/s (%d received and acked in %.3f s)", r.ConsumeMsgsPerSec, r.Messages, r.ConsumeSeconds)},
		{"publish latency p50", fmt.Sprintf("%.3f ms (submit -> durable at the node)", r.P50ms)},
		{"publish latency p99", fmt.Sprintf("%.3f ms", r.P99ms)},
		{"publish latency max", fmt.Sprintf("%.3f ms", r.MaxMs)},
		{"peak RSS node", fmt.Sprintf("%.1f MiB", r.NodePeakRSSMB)},
		{"peak RSS clients", fmt.Sprintf("%.1f MiB (this process)", r.ClientPeakRSSMB)},
	}
	figs = append(figs, r.baseline.ratioFigures("publish", r.RatioToLocal)...)
	if n := r.NATS; n != nil {
		figs = append(figs, n.lines()...)
		figs = append(figs,
			figure{"publish ratio to nats", fmt.Sprintf("%.2fx NATS JetStream async publish (same run)", r.PublishRatioToNATS)},
			figure{"consume ratio to nats", fmt.Sprintf("%.2fx NATS JetStream pull consume (same run)", r.ConsumeRatioToNATS)})
		if r.NATSVersion != "" {
			figs = append(figs, figure{"nats version", r.NATSVersion + natsVersionNote})
		}
	}
	if r.Runs > 1 {
		figs[0].value += fmt.Sprintf("; the rates, latencies, baselines and ratios are the medians of %d rounds, the memory the median round's", r.Runs)
		for i, rd := range r.Rounds {
			v := fmt.Sprintf("publish %.0f, consume %.0f msgs/s; local %.0f msgs/s, ratio %.2fx", rd.PublishMsgsPerSec, rd.ConsumeMsgsPerSec, rd.LocalMsgsPerSec, rd.RatioToLocal)
			if rd.NATSPublishMsgsPerSec > 0 {
				v += fmt.Sprintf("; nats publish %.0f, consume %.0f msgs/s, ratios %.2fx, %.2fx",
					rd.NATSPublishMsgsPerSec, rd.NATSConsumeMsgsPerSec, rd.PublishRatioToNATS, rd.ConsumeRatioToNATS)
			}
			figs = append(figs, figure{fmt.Sprintf("round %d", i+1), v})
		}
	}
	return figs
}

// windowText describes the producers' window.
func (r *clientResult) windowText() string {
	w := "default window"
	if r.Window > 0 {
		w = fmt.Sprintf("window %d", r.Window)
	}
	return fmt.Sprintf("%s, %d KiB: %d in flight", w, r.WindowBytes>>10, r.InFlight)
}
