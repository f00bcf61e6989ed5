package bench

import (
	"context"
	"fmt"
	"io"
	"maps"
	"runtime"
	"slices"
	"time"
)

// LinkOptions are the flags of `bench link`.
type LinkOptions struct {
	Hops, Messages, Size, Window int
	// Queues spreads the messages over that many addresses at b: as many
	// send queues at a, over one connection.
	Queues int
	// Runs is how many rounds the steady scenario measures, each with
	// its own baselines and its own nodes; 0 means 1.
	Runs int
	// BaselineMessages bounds the local baseline's messages; 0 skips it.
	BaselineMessages int
	// NoRawBaseline skips the raw-copy baseline.
	NoRawBaseline bool
	// Rate paces the producer in messages per second, 0 for unpaced.
	Rate          float64
	Sync          string
	JSON, Backlog bool
	Timeout       time.Duration
}

// DefaultBacklog is --messages of --backlog when it is not given.
const DefaultBacklog = 1_000_000

// linkFigures are the figures every link scenario reports. The JSON field
// names are a contract with the scripts that compare runs: add, never
// rename.
type linkFigures struct {
	Scenario string  `json:"scenario"`
	Hops     int     `json:"hops"`
	Messages int     `json:"messages"`
	Size     int     `json:"size"`
	Sync     string  `json:"sync"`
	Rate     float64 `json:"rate"`
	Window   int     `json:"window"`
	Queues   int     `json:"queues"`
	// MsgsPerSec is end to end: see each scenario.
	MsgsPerSec float64 `json:"msgs_per_sec"`
	// EnqueueMsgsPerSec is the producer's: first submit -> last durable.
	EnqueueMsgsPerSec float64 `json:"enqueue_msgs_per_sec"`
	ElapsedSeconds    float64 `json:"elapsed_seconds"`
	// PeakRSSMB is the highest VmHWM of any node; RSSMB each node's.
	PeakRSSMB float64            `json:"peak_rss_mb"`
	RSSMB     map[string]float64 `json:"rss_mb"`
	// CommitMaxMs and SlowCommits are, for a and b, the longest group
	// commit of the run and how many took over 10 ms: the disk's stalls,
	// which a tail latency meets (fsync_p50_us is its median, measured
	// before the run). Commits counts them all.
	CommitMaxMs map[string]float64 `json:"commit_max_ms"`
	SlowCommits map[string]int64   `json:"slow_commits"`
	Commits     map[string]int64   `json:"commits"`
	// Pids are the node processes', all stopped when the bench returns.
	Pids      map[string]int `json:"pids"`
	CPUs      int            `json:"cpus"`
	GoVersion string         `json:"go_version"`
	// The baselines of the same invocation, and msgs_per_sec over the
	// local one.
	baseline
	RatioToLocal float64 `json:"ratio_to_local"`
	// MiBPerSec is msgs_per_sec in bytes of bodies: msgs_per_sec × size,
	// in MiB/s; RatioToRaw is it over the raw copy of the same invocation.
	MiBPerSec float64 `json:"mib_per_sec"`
	rawBaseline
	RatioToRaw float64 `json:"ratio_to_raw"`
}

// linkResult is the JSON object of `bench link --json`.
type linkResult struct {
	linkFigures
	// Latency from submit at a to receive at b (sent_ns property).
	P50ms float64 `json:"p50_ms"`
	P99ms float64 `json:"p99_ms"`
	MaxMs float64 `json:"max_ms"`
	// With --queues above 1: a's memory grown from before its first send
	// to once every send queue is drained and idle, after a GC, per send
	// queue, in KiB: the Go heap and stacks, and the resident set. An upper
	// bound of what an idle send queue costs, since it counts what the
	// traffic left behind as well.
	GoKiBPerQueue  float64 `json:"go_kib_per_queue"`
	RSSKiBPerQueue float64 `json:"rss_kib_per_queue"`
	// The same per queue for as many more send queues, one message each,
	// made once the first were drained and idle: the growth of one more
	// idle send queue, without the caches and buffers the run's burst
	// grew once for all of them.
	MoreGoKiBPerQueue  float64 `json:"more_go_kib_per_queue"`
	MoreRSSKiBPerQueue float64 `json:"more_rss_kib_per_queue"`
	// Runs is the rounds measured. With more than one, the rates, the
	// baselines, the ratios and the latencies above are the medians of
	// Rounds' (each ratio the median of the rounds' ratios, not a ratio
	// of medians); the other figures (commits, memory, pids) are those of
	// the round whose ratio_to_local is the median, the lower of the two
	// middle ones when the rounds are even.
	Runs   int         `json:"runs"`
	Rounds []LinkRound `json:"rounds,omitempty"`
}

// LinkRound is one round of `bench link --runs`: its own baselines, then
// its own nodes. The field names are those of the result's.
type LinkRound struct {
	MsgsPerSec        float64 `json:"msgs_per_sec"`
	EnqueueMsgsPerSec float64 `json:"enqueue_msgs_per_sec"`
	LocalMsgsPerSec   float64 `json:"baseline_local_msgs_per_sec"`
	RatioToLocal      float64 `json:"ratio_to_local"`
	RawMiBPerSec      float64 `json:"baseline_raw_mib_per_sec"`
	RatioToRaw        float64 `json:"ratio_to_raw"`
	FsyncP50us        float64 `json:"fsync_p50_us"`
	P50ms             float64 `json:"p50_ms"`
	P99ms             float64 `json:"p99_ms"`
}

// backlogResult is the JSON object of `bench link --backlog --json`.
type backlogResult struct {
	linkFigures
	// UrgentMs is b ready -> the priority-9 message received at b;
	// UrgentIndex its rank among b's receives (0 = first).
	UrgentMs    float64 `json:"urgent_ms"`
	UrgentIndex int     `json:"urgent_index"`
	// QueuedRSSMB is a's VmHWM once the backlog was durable.
	QueuedRSSMB float64 `json:"queued_rss_mb"`
}

func (o LinkOptions) validate() error {
	if o.Hops != 1 && o.Hops != 2 {
		return usageErrorf("invalid argument %d for \"--hops\" flag: want 1 or 2", o.Hops)
	}
	for _, c := range []struct {
		flag   string
		v, min int
	}{{"messages", o.Messages, 1}, {"size", o.Size, 0}, {"window", o.Window, 1}, {"queues", o.Queues, 1}, {"runs", o.Runs, 0}} {
		if c.v < c.min {
			return usageErrorf("invalid argument %d for \"--%s\" flag: want at least %d", c.v, c.flag, c.min)
		}
	}
	if o.Rate < 0 {
		return usageErrorf("invalid argument %v for \"--rate\" flag: want 0 or more", o.Rate)
	}
	if o.Queues > 1 && o.Backlog {
		return usageErrorf("--queues and --backlog do not go together")
	}
	if o.Runs > 1 && o.Backlog {
		return usageErrorf("--runs and --backlog do not go together: run the backlog again instead")
	}
	if err := checkTimeout(o.Timeout); err != nil {
		return err
	}
	_, err := parseSync(o.Sync)
	return err
}

// RunLink runs `bench link`, steady or with o.Backlog, between node
// processes. It prints the figures, or one JSON object with o.JSON, on
// stdout, and progress on stderr. With o.Runs above 1 the steady
// scenario runs that many rounds, each measuring its baselines first and
// then starting its own nodes in a directory of its own.
func RunLink(ctx context.Context, o LinkOptions, stdout, stderr io.Writer) error {
	if err := o.validate(); err != nil {
		return err
	}
	b := procBench{name: "link", timeout: o.Timeout, json: o.JSON}
	return b.run(ctx, stdout, stderr, func(ctx, life context.Context, exe, dir string) (figurer, error) {
		runs := max(o.Runs, 1)
		if runs == 1 {
			return o.round(ctx, life, exe, dir, stderr)
		}
		rs, err := rounds(dir, runs, stderr, func(dir string) (*linkResult, error) {
			res, err := o.round(ctx, life, exe, dir, stderr)
			if err != nil {
				return nil, err
			}
			return res.(*linkResult), nil
		})
		if err != nil {
			return nil, err
		}
		return medianLink(rs), nil
	})
}

// round measures the baselines in dir, then runs the scenario with its
// nodes in dir.
func (o LinkOptions) round(ctx, life context.Context, exe, dir string, progress io.Writer) (figurer, error) {
	bl, err := measureBaseline(ctx, dir, o.Sync, o.Messages, o.BaselineMessages, o.Size, progress)
	if err != nil {
		return nil, err
	}
	var raw rawBaseline
	if !o.NoRawBaseline {
		// The bytes of the bodies the run sends, as far as the cap.
		n := min(int64(o.Messages)*int64(o.Size), RawBaselineMaxBytes)
		if raw, err = measureRawCopy(ctx, dir, n, progress); err != nil {
			return nil, err
		}
	}
	r := &linkRun{procRun: newProcRun(life, exe, dir, o.Sync, progress), o: o, baseline: bl, raw: raw}
	ctx, r.died = context.WithCancelCause(ctx)
	defer r.died(nil)
	if o.Backlog {
		res, err := r.runBacklog(ctx)
		return res, r.stopped(err)
	}
	res, err := r.runLink(ctx)
	if res != nil {
		res.Runs = 1
	}
	return res, r.stopped(err)
}

// medianLink makes the result of several rounds: see linkResult.Runs.
func medianLink(rounds []*linkResult) *linkResult {
	res := *medianRound(rounds, func(r *linkResult) float64 { return r.RatioToLocal })
	type f = medianField[linkResult]
	setMedians(&res, rounds,
		f{func(r *linkResult) *float64 { return &r.MsgsPerSec }, 2},
		f{func(r *linkResult) *float64 { return &r.EnqueueMsgsPerSec }, 2},
		f{func(r *linkResult) *float64 { return &r.LocalMsgsPerSec }, 2},
		f{func(r *linkResult) *float64 { return &r.RatioToLocal }, 3},
		f{func(r *linkResult) *float64 { return &r.RawMiBPerSec }, 2},
		f{func(r *linkResult) *float64 { return &r.RatioToRaw }, 3},
		f{func(r *linkResult) *float64 { return &r.MiBPerSec }, 2},
		f{func(r *linkResult) *float64 { return &r.FsyncP50us }, 1},
		f{func(r *linkResult) *float64 { return &r.P50ms }, 3},
		f{func(r *linkResult) *float64 { return &r.P99ms }, 3},
		f{func(r *linkResult) *float64 { return &r.MaxMs }, 3},
		f{func(r *linkResult) *float64 { return &r.ElapsedSeconds }, 3})
	res.Runs = len(rounds)
	res.Rounds = make([]LinkRound, len(rounds))
	for i, rd := range rounds {
		res.Rounds[i] = LinkRound{
			MsgsPerSec: rd.MsgsPerSec, EnqueueMsgsPerSec: rd.EnqueueMsgsPerSec, LocalMsgsPerSec: rd.LocalMsgsPerSec,
			RatioToLocal: rd.RatioToLocal, RawMiBPerSec: rd.RawMiBPerSec, RatioToRaw: rd.RatioToRaw,
			FsyncP50us: rd.FsyncP50us, P50ms: rd.P50ms, P99ms: rd.P99ms,
		}
	}
	return &res
}

// base fills the figures common to the scenarios.
func (r *linkRun) base(scenario string, rss map[string]float64) linkFigures {
	f := linkFigures{
		Scenario: scenario, Hops: r.o.Hops, Messages: r.o.Messages, Size: r.o.Size, Sync: r.o.Sync,
		Rate: r.o.Rate, Window: r.o.Window, Queues: r.o.Queues, RSSMB: rss, Pids: map[string]int{},
		CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), baseline: r.baseline, rawBaseline: r.raw,
	}
	for _, v := range rss {
		f.PeakRSSMB = max(f.PeakRSSMB, v)
	}
	for name, p := range r.procs {
		f.Pids[name] = p.Pid()
	}
	return f
}

// setRatios fills the figures derived from MsgsPerSec: the rate in bytes
// of bodies, and the ratios to the baselines.
func (f *linkFigures) setRatios() {
	f.RatioToLocal = ratio(f.MsgsPerSec, f.LocalMsgsPerSec)
	f.MiBPerSec = round(f.MsgsPerSec*float64(f.Size)/(1<<20), 2)
	f.RatioToRaw = ratio(f.MiBPerSec, f.RawMiBPerSec)
}

// path says which way the messages go, for the human output.
func (f linkFigures) path() string {
	if f.Hops == 2 {
		return "2 hops, a -> c -> b"
	}
	return "1 hop, a -> b"
}

// setCommits fills the commit figures from each agent node's.
func (f *linkFigures) setCommits(nodes map[string]commitFigures) {
	f.CommitMaxMs, f.SlowCommits, f.Commits = map[string]float64{}, map[string]int64{}, map[string]int64{}
	for name, c := range nodes {
		f.CommitMaxMs[name], f.SlowCommits[name], f.Commits[name] = c.CommitMaxMs, c.SlowCommits, c.Commits
	}
}

func (f linkFigures) commitFigures() []figure {
	var figs []figure
	for _, name := range slices.Sorted(maps.Keys(f.Commits)) {
		figs = append(figs, figure{"commits " + name, fmt.Sprintf("%d, %d over %s, the longest %.1f ms",
			f.Commits[name], f.SlowCommits[name], slowCommit, f.CommitMaxMs[name])})
	}
	return figs
}

func (f linkFigures) rssFigures() []figure {
	var figs []figure
	for _, name := range slices.Sorted(maps.Keys(f.RSSMB)) {
		figs = append(figs, figure{"peak RSS " + name, fmt.Sprintf("%.1f MiB", f.RSSMB[name])})
	}
	return append(figs, figure{"peak RSS", fmt.Sprintf("%.1f MiB (highest node)", f.PeakRSSMB)})
}

func (r *linkResult) figures() []figure {
	pace := "unpaced"
	if r.Rate > 0 {
		pace = fmt.Sprintf("paced at %.0f msgs/s", r.Rate)
	}
	figs := []figure{
		{"scenario", fmt.Sprintf("link: %s, %d messages of %d B over %d send queues, sync %s, %s, window %d",
			r.path(), r.Messages, r.Size, r.Queues, r.Sync, pace, r.Window)},
		{"end-to-end", fmt.Sprintf("%.0f msgs/s (%d received in %.3f s, first submit -> last receive)", r.MsgsPerSec, r.Messages, r.ElapsedSeconds)},
		{"bodies", fmt.Sprintf("%.1f MiB/s end to end (msgs/s x size)", r.MiBPerSec)},
		{"enqueue at a", fmt.Sprintf("%.0f msgs/s (first submit -> last durable)", r.EnqueueMsgsPerSec)},
		{"latency p50", fmt.Sprintf("%.3f ms (submit at a -> receive at b)", r.P50ms)},
		{"latency p99", fmt.Sprintf("%.3f ms", r.P99ms)},
		{"latency max", fmt.Sprintf("%.3f ms", r.MaxMs)},
	}
	if r.Queues > 1 {
		figs = append(figs, figure{"idle send queue", fmt.Sprintf("%.1f KiB Go heap+stacks, %.1f KiB RSS per queue at a (growth once drained / %d)",
			r.GoKiBPerQueue, r.RSSKiBPerQueue, r.Queues)})
		figs = append(figs, figure{"one more idle", fmt.Sprintf("%.1f KiB Go heap+stacks, %.1f KiB RSS per queue at a (growth for %d more send queues, one message each, made once the first were idle)",
			r.MoreGoKiBPerQueue, r.MoreRSSKiBPerQueue, r.Queues)})
	}
	figs = append(figs, r.baseline.ratioFigures("end-to-end", r.RatioToLocal)...)
	figs = append(figs, r.rawBaseline.ratioFigures("bodies end to end", r.RatioToRaw)...)
	if r.Runs > 1 {
		figs[0].value += fmt.Sprintf("; the rates, baselines, ratios and latencies are the medians of %d rounds, the commits and memory the median round's", r.Runs)
		for i, rd := range r.Rounds {
			figs = append(figs, figure{fmt.Sprintf("round %d", i+1), fmt.Sprintf("end-to-end %.0f msgs/s, local %.0f msgs/s, ratio %.2fx, p99 %.3f ms, fsync p50 %.0f us",
				rd.MsgsPerSec, rd.LocalMsgsPerSec, rd.RatioToLocal, rd.P99ms, rd.FsyncP50us)})
		}
	}
	figs = append(figs, r.commitFigures()...)
	return append(figs, r.rssFigures()...)
}

func (r *backlogResult) figures() []figure {
	figs := []figure{
		{"scenario", fmt.Sprintf("link-backlog: %s, %d messages of %d B queued with b down, then 1 at priority 9; sync %s",
			r.path(), r.Messages, r.Size, r.Sync)},
		{"queue at a", fmt.Sprintf("%.0f msgs/s (first submit -> last durable)", r.EnqueueMsgsPerSec)},
		{"a RSS queued", fmt.Sprintf("%.1f MiB (peak, once the backlog was durable)", r.QueuedRSSMB)},
		{"drain", fmt.Sprintf("%.0f msgs/s (%d received in %.3f s from b ready)", r.MsgsPerSec, r.Messages+1, r.ElapsedSeconds)},
		{"bodies", fmt.Sprintf("%.1f MiB/s drained (msgs/s x size)", r.MiBPerSec)},
		{"urgent", fmt.Sprintf("%.3f ms from b ready to the priority-9 message received (receive #%d)", r.UrgentMs, r.UrgentIndex+1)},
	}
	figs = append(figs, r.baseline.figures("drain", r.MsgsPerSec)...)
	figs = append(figs, r.rawBaseline.figures("bodies drained", r.MiBPerSec)...)
	figs = append(figs, r.commitFigures()...)
	return append(figs, r.rssFigures()...)
}
