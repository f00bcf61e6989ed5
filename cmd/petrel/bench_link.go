package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

type linkOptions struct {
	hops, messages, size, window int
	rate                         float64
	sync                         string
	json, backlog                bool
	timeout                      time.Duration
}

// defaultBacklog is --messages of --backlog when it is not given.
const defaultBacklog = 1_000_000

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
	// MsgsPerSec is end to end: see each scenario.
	MsgsPerSec float64 `json:"msgs_per_sec"`
	// EnqueueMsgsPerSec is the producer's: first submit -> last durable.
	EnqueueMsgsPerSec float64 `json:"enqueue_msgs_per_sec"`
	ElapsedSeconds    float64 `json:"elapsed_seconds"`
	// PeakRSSMB is the highest VmHWM of any node; RSSMB each node's.
	PeakRSSMB float64            `json:"peak_rss_mb"`
	RSSMB     map[string]float64 `json:"rss_mb"`
	// Pids are the node processes', all stopped when the bench returns.
	Pids      map[string]int `json:"pids"`
	CPUs      int            `json:"cpus"`
	GoVersion string         `json:"go_version"`
}

// linkResult is the JSON object of `bench link --json`.
type linkResult struct {
	linkFigures
	// Latency from submit at a to receive at b (sent_ns property).
	P50ms float64 `json:"p50_ms"`
	P99ms float64 `json:"p99_ms"`
	MaxMs float64 `json:"max_ms"`
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

func newBenchLinkCmd() *cobra.Command {
	var o linkOptions
	cmd := &cobra.Command{
		Use:   "link",
		Short: "Messages across one or two links, between node processes",
		Long: `Measure links on loopback, every node its own petrel process: a produces
(bench agent produce), b consumes (bench agent consume), and with --hops 2,
c relays (petrel node). a sends --messages data messages of --size bytes to
bench@b with --window sends in flight, paced at --rate messages/s if set.

Figures:
  msgs_per_sec          messages / (first submit at a -> last receive at b)
  enqueue_msgs_per_sec  messages / (first submit at a -> last send durable)
  p50_ms, p99_ms        submit at a -> receive at b; without --rate it is
                        mostly time queued behind the others
  rss_mb, peak_rss_mb   each node's peak resident set size (VmHWM), highest

--backlog: with b down, a queues --messages messages (default 1,000,000),
then one at priority 9; b starts then. Figures: msgs_per_sec is the drain,
(messages + 1) / (b ready -> last receive at b); urgent_ms is b ready -> the
priority-9 message received at b; queued_rss_mb is a's VmHWM once its
backlog is queued. Senders reconnect with a backoff of 10ms to 100ms, so
urgent_ms includes up to 100ms before a (or c) finds b.

The nodes' configurations, data and stderr live in a temporary directory,
removed at the end; every node process is stopped before the bench returns,
also on failure or SIGINT.`,
		Example: `  petrel bench link
  petrel bench link --hops 2 --json
  petrel bench link --rate 10000 --messages 100000 --json
  petrel bench link --backlog --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.backlog && !cmd.Flags().Changed("messages") {
				o.messages = defaultBacklog
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runBenchLink(ctx, o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.hops, "hops", 1, "links between producer and consumer: 1 (a -> b) or 2 (a -> c -> b)")
	f.IntVar(&o.messages, "messages", 200000, "messages to send (--backlog: 1000000)")
	f.IntVar(&o.size, "size", 128, "body size in `bytes`")
	f.StringVar(&o.sync, "sync", "full", "store sync mode of every node: full or normal")
	f.Float64Var(&o.rate, "rate", 0, "messages per second (0: as fast as the window allows)")
	f.IntVar(&o.window, "window", 1024, "sends in flight at the producer")
	f.BoolVar(&o.backlog, "backlog", false, "queue the messages with b down, then start b")
	f.DurationVar(&o.timeout, "timeout", 15*time.Minute, "give up after this long")
	f.BoolVar(&o.json, "json", false, "print one JSON object on stdout")
	return cmd
}

func (o linkOptions) validate() error {
	if o.hops != 1 && o.hops != 2 {
		return usageErrorf("invalid argument %d for \"--hops\" flag: want 1 or 2", o.hops)
	}
	for _, c := range []struct {
		flag   string
		v, min int
	}{{"messages", o.messages, 1}, {"size", o.size, 0}, {"window", o.window, 1}} {
		if c.v < c.min {
			return usageErrorf("invalid argument %d for \"--%s\" flag: want at least %d", c.v, c.flag, c.min)
		}
	}
	if o.rate < 0 {
		return usageErrorf("invalid argument %v for \"--rate\" flag: want 0 or more", o.rate)
	}
	if o.timeout <= 0 {
		return usageErrorf("invalid argument %v for \"--timeout\" flag: want a positive duration", o.timeout)
	}
	_, err := parseSync(o.sync)
	return err
}

func runBenchLink(ctx context.Context, o linkOptions, stdout, stderr io.Writer) error {
	if err := o.validate(); err != nil {
		return err
	}
	b := procBench{name: "link", timeout: o.timeout, json: o.json}
	return b.run(ctx, stdout, stderr, func(ctx, life context.Context, exe, dir string) (figurer, error) {
		r := &linkRun{o: o, exe: exe, dir: dir, progress: stderr, procs: map[string]*proc{}, life: life}
		ctx, r.died = context.WithCancelCause(ctx)
		defer r.died(nil)
		var res figurer
		var err error
		if o.backlog {
			res, err = r.runBacklog(ctx)
		} else {
			res, err = r.runLink(ctx)
		}
		return res, r.stopped(err)
	})
}

// base fills the figures common to the scenarios.
func (r *linkRun) base(scenario string, rss map[string]float64) linkFigures {
	f := linkFigures{
		Scenario: scenario, Hops: r.o.hops, Messages: r.o.messages, Size: r.o.size, Sync: r.o.sync,
		Rate: r.o.rate, Window: r.o.window, RSSMB: rss, Pids: map[string]int{},
		CPUs: runtime.NumCPU(), GoVersion: runtime.Version(),
	}
	for _, v := range rss {
		f.PeakRSSMB = max(f.PeakRSSMB, v)
	}
	for name, p := range r.procs {
		f.Pids[name] = p.Pid()
	}
	return f
}

// path says which way the messages go, for the human output.
func (f linkFigures) path() string {
	if f.Hops == 2 {
		return "2 hops, a -> c -> b"
	}
	return "1 hop, a -> b"
}

func (f linkFigures) rssFigures() []figure {
	names := make([]string, 0, len(f.RSSMB))
	for name := range f.RSSMB {
		names = append(names, name)
	}
	sort.Strings(names)
	var figs []figure
	for _, name := range names {
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
		{"scenario", fmt.Sprintf("link: %s, %d messages of %d B, sync %s, %s, window %d",
			r.path(), r.Messages, r.Size, r.Sync, pace, r.Window)},
		{"end-to-end", fmt.Sprintf("%.0f msgs/s (%d received in %.3f s, first submit -> last receive)", r.MsgsPerSec, r.Messages, r.ElapsedSeconds)},
		{"enqueue at a", fmt.Sprintf("%.0f msgs/s (first submit -> last durable)", r.EnqueueMsgsPerSec)},
		{"latency p50", fmt.Sprintf("%.3f ms (submit at a -> receive at b)", r.P50ms)},
		{"latency p99", fmt.Sprintf("%.3f ms", r.P99ms)},
		{"latency max", fmt.Sprintf("%.3f ms", r.MaxMs)},
	}
	return append(figs, r.rssFigures()...)
}

func (r *backlogResult) figures() []figure {
	figs := []figure{
		{"scenario", fmt.Sprintf("link-backlog: %s, %d messages of %d B queued with b down, then 1 at priority 9; sync %s",
			r.path(), r.Messages, r.Size, r.Sync)},
		{"queue at a", fmt.Sprintf("%.0f msgs/s (first submit -> last durable)", r.EnqueueMsgsPerSec)},
		{"a RSS queued", fmt.Sprintf("%.1f MiB (peak, once the backlog was durable)", r.QueuedRSSMB)},
		{"drain", fmt.Sprintf("%.0f msgs/s (%d received in %.3f s from b ready)", r.MsgsPerSec, r.Messages+1, r.ElapsedSeconds)},
		{"urgent", fmt.Sprintf("%.3f ms from b ready to the priority-9 message received (receive #%d)", r.UrgentMs, r.UrgentIndex+1)},
	}
	return append(figs, r.rssFigures()...)
}

// joinArgs formats a command line for progress lines.
func joinArgs(args []string) string { return strings.Join(args, " ") }
