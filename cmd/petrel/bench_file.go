package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

// fileOptions are the flags of `bench file`.
type fileOptions struct {
	hops, sizeMiB, runs    int
	chunkKiB, window       int
	syncKiB, concurrency   int
	dir                    string
	json, noBaseline, keep bool
	timeout                time.Duration
}

// fileRound is what one round measured: a baseline copy, then a transfer.
type fileRound struct {
	// MiBPerSec is size / Seconds, Seconds being from the Send call at a
	// (which first reads the whole file for its SHA-256) to the file
	// message received from the queue files at b, the file in place.
	MiBPerSec float64 `json:"mib_per_sec"`
	Seconds   float64 `json:"seconds"`
	// SendSeconds is the Send call alone: describe (SHA-256) and store.
	SendSeconds float64 `json:"send_seconds"`
	// HandedSeconds is from the Send call to a's send queue empty: the
	// first hop took custody of the file.
	HandedSeconds float64 `json:"handed_seconds"`
	// BaselineMiBPerSec is a plain copy of the same file over one loopback
	// TCP connection in this process, 1 MiB buffer, fsync at the end, no
	// hashing: the physical ceiling, the faster of two copies. 0 with
	// --no-baseline.
	BaselineMiBPerSec float64 `json:"baseline_mib_per_sec"`
	BaselineSeconds   float64 `json:"baseline_seconds"`
	// BaselineFsyncSeconds is the baseline's final fsync alone: the part
	// of BaselineSeconds the disk takes once the bytes are in the cache.
	BaselineFsyncSeconds float64 `json:"baseline_fsync_seconds"`
	// Ratio is MiBPerSec / BaselineMiBPerSec, 0 without a baseline.
	Ratio float64 `json:"ratio"`
}

// rounded fills the rates from the times, and rounds for the JSON.
func (f fileRound) rounded(sizeMiB int) fileRound {
	mib := float64(sizeMiB)
	f.MiBPerSec = round(mib/f.Seconds, 2)
	if f.BaselineSeconds > 0 {
		f.BaselineMiBPerSec = round(mib/f.BaselineSeconds, 2)
		f.Ratio = round(f.BaselineSeconds/f.Seconds, 3)
	}
	f.Seconds, f.SendSeconds, f.HandedSeconds = round(f.Seconds, 3), round(f.SendSeconds, 3), round(f.HandedSeconds, 3)
	f.BaselineSeconds, f.BaselineFsyncSeconds = round(f.BaselineSeconds, 3), round(f.BaselineFsyncSeconds, 3)
	return f
}

// fileResult is the JSON object of `bench file --json`. The field names
// are a contract with the scripts that compare runs: add, never rename.
type fileResult struct {
	Scenario string `json:"scenario"` // "file"
	Hops     int    `json:"hops"`
	SizeMiB  int    `json:"size_mib"`
	// ChunkKiB, Window, SyncKiB and Concurrency are the flags; 0 means the
	// node's default.
	ChunkKiB    int `json:"chunk_kib"`
	Window      int `json:"window"`
	SyncKiB     int `json:"sync_kib"`
	Concurrency int `json:"concurrency"`
	// fileRound is the median of the rounds, each time on its own; the
	// rates and the ratio are those of the median times.
	fileRound
	// Runs are the rounds, in order.
	Runs []fileRound `json:"runs"`
	// SHA256 is the file's, checked on the file placed at b.
	SHA256 string `json:"sha256"`
	// PeakRSSMB is the highest VmHWM of any node; RSSMB each node's,
	// the highest of the rounds.
	PeakRSSMB float64            `json:"peak_rss_mb"`
	RSSMB     map[string]float64 `json:"rss_mb"`
	// Pids are the node processes' of the last round, all stopped when
	// the bench returns.
	Pids      map[string]int `json:"pids"`
	CPUs      int            `json:"cpus"`
	GoVersion string         `json:"go_version"`
}

func newBenchFileCmd() *cobra.Command {
	var o fileOptions
	cmd := &cobra.Command{
		Use:   "file",
		Short: "One file across one or two links, between node processes",
		Long: `Measure a file transfer on loopback, every node its own petrel process: a
sends (bench agent sendfile), b receives (bench agent recvfile), and with
--hops 2, c relays (petrel node, address files with role relay). The file,
--size-mib MiB of random bytes, is written to the bench directory first and
synced; that is not timed.

Figures:
  mib_per_sec           size / (Send called at a -> file message received
                        from the queue files at b); Send first reads the
                        whole file for its SHA-256
  send_seconds          the Send call alone (describe and store)
  handed_seconds        Send called -> a's send queue empty (the next hop
                        took custody)
  baseline_mib_per_sec  the same file copied disk -> one loopback TCP
                        connection -> disk in this process, 1 MiB buffer,
                        fsync at the end, no hashing: the ceiling (the
                        faster of two copies)
  ratio                 mib_per_sec / baseline_mib_per_sec
  rss_mb, peak_rss_mb   each node's peak resident set size (VmHWM), highest

Each of --runs rounds copies the file twice (the baseline), then starts
fresh nodes and transfers it; the figures are the medians, and "runs" in the JSON
lists every round. Disks and shared CPUs vary: use --runs 3 or more to
compare builds. The file placed at b must have the SHA-256 of the one sent,
else the bench fails.

--chunk-kib, --window, --sync-kib and --concurrency set the nodes' files
section; 0 keeps the default (128 KiB chunks, 64 in flight, a sync every
8 MiB or half a window, 4 files at once).

Everything lives in a temporary directory under --dir, removed at the end
(kept with --keep); every node process is stopped before the bench returns,
also on failure or SIGINT. PETREL_CPUPROFILE=prefix has a and b write CPU
profiles of their work to prefix.a.pprof and prefix.b.pprof.`,
		Example: `  petrel bench file
  petrel bench file --size-mib 256 --hops 2 --json
  petrel bench file --runs 3 --chunk-kib 1024 --window 32`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runBenchFile(ctx, o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.sizeMiB, "size-mib", 1024, "file size in MiB")
	f.IntVar(&o.hops, "hops", 1, "links between sender and receiver: 1 (a -> b) or 2 (a -> c -> b)")
	f.IntVar(&o.runs, "runs", 1, "rounds of baseline and transfer; the figures are the medians")
	f.IntVar(&o.chunkKiB, "chunk-kib", 0, "chunk size in KiB (0: the node's default)")
	f.IntVar(&o.window, "window", 0, "chunks in flight per transfer (0: the node's default)")
	f.IntVar(&o.syncKiB, "sync-kib", 0, "KiB a receiver appends between two syncs, at most (0: the node's default)")
	f.IntVar(&o.concurrency, "concurrency", 0, "files of one send queue moving at once (0: the node's default)")
	f.StringVar(&o.dir, "dir", "", "make the bench directory in this `folder` (default: the system's temp folder)")
	f.BoolVar(&o.noBaseline, "no-baseline", false, "skip the plain TCP copy")
	f.BoolVar(&o.keep, "keep", false, "keep the bench directory (configurations, data, stderr of each node)")
	f.DurationVar(&o.timeout, "timeout", 30*time.Minute, "give up after this long")
	f.BoolVar(&o.json, "json", false, "print one JSON object on stdout")
	return cmd
}

func (o fileOptions) validate() error {
	if o.hops != 1 && o.hops != 2 {
		return usageErrorf("invalid argument %d for \"--hops\" flag: want 1 or 2", o.hops)
	}
	if o.sizeMiB < 1 {
		return usageErrorf("invalid argument %d for \"--size-mib\" flag: want at least 1", o.sizeMiB)
	}
	if o.runs < 1 {
		return usageErrorf("invalid argument %d for \"--runs\" flag: want at least 1", o.runs)
	}
	for _, c := range []struct {
		flag string
		v    int
	}{{"chunk-kib", o.chunkKiB}, {"window", o.window}, {"sync-kib", o.syncKiB}, {"concurrency", o.concurrency}} {
		if c.v < 0 {
			return usageErrorf("invalid argument %d for \"--%s\" flag: want 0 (the default) or more", c.v, c.flag)
		}
	}
	// A chunk travels in one Data frame, at most the link's max_frame
	// (16 MiB by default), with the packet's header.
	if o.chunkKiB > 16<<10-1 {
		return usageErrorf("invalid argument %d for \"--chunk-kib\" flag: want at most %d (below the 16 MiB frame)", o.chunkKiB, 16<<10-1)
	}
	if o.timeout <= 0 {
		return usageErrorf("invalid argument %v for \"--timeout\" flag: want a positive duration", o.timeout)
	}
	if o.dir != "" {
		if fi, err := os.Stat(o.dir); err != nil || !fi.IsDir() {
			return usageErrorf("invalid argument %q for \"--dir\" flag: not a folder", o.dir)
		}
	}
	return nil
}

func runBenchFile(ctx context.Context, o fileOptions, stdout, stderr io.Writer) error {
	if err := o.validate(); err != nil {
		return err
	}
	b := procBench{name: "file", parent: o.dir, keep: o.keep, timeout: o.timeout, json: o.json}
	return b.run(ctx, stdout, stderr, func(ctx, life context.Context, exe, dir string) (figurer, error) {
		fb := &fileBench{o: o, exe: exe, dir: dir, progress: stderr, life: life}
		return fb.run(ctx)
	})
}

// newFileResult fills the figures that do not depend on the run.
func newFileResult(o fileOptions) *fileResult {
	return &fileResult{
		Scenario: "file", Hops: o.hops, SizeMiB: o.sizeMiB, ChunkKiB: o.chunkKiB, Window: o.window,
		SyncKiB: o.syncKiB, Concurrency: o.concurrency, RSSMB: map[string]float64{}, Pids: map[string]int{},
		CPUs: runtime.NumCPU(), GoVersion: runtime.Version(),
	}
}

// summarize sets the median figures from the rounds.
func (r *fileResult) summarize() {
	median := func(get func(fileRound) float64) float64 {
		v := make([]float64, len(r.Runs))
		for i, f := range r.Runs {
			v[i] = get(f)
		}
		slices.Sort(v)
		if n := len(v); n%2 == 0 {
			return (v[n/2-1] + v[n/2]) / 2
		}
		return v[len(v)/2]
	}
	r.fileRound = fileRound{
		Seconds:              median(func(f fileRound) float64 { return f.Seconds }),
		SendSeconds:          median(func(f fileRound) float64 { return f.SendSeconds }),
		HandedSeconds:        median(func(f fileRound) float64 { return f.HandedSeconds }),
		BaselineSeconds:      median(func(f fileRound) float64 { return f.BaselineSeconds }),
		BaselineFsyncSeconds: median(func(f fileRound) float64 { return f.BaselineFsyncSeconds }),
	}.rounded(r.SizeMiB)
}

func (r *fileResult) figures() []figure {
	path := "1 hop, a -> b"
	if r.Hops == 2 {
		path = "2 hops, a -> c -> b"
	}
	orDefault := func(v int, unit string) string {
		if v == 0 {
			return "default"
		}
		return fmt.Sprintf("%d%s", v, unit)
	}
	of := ""
	if len(r.Runs) > 1 {
		of = fmt.Sprintf(", median of %d rounds", len(r.Runs))
	}
	figs := []figure{
		{"scenario", fmt.Sprintf("file: %s, %d MiB, chunk %s, window %s, sync %s, concurrency %s",
			path, r.SizeMiB, orDefault(r.ChunkKiB, " KiB"), orDefault(r.Window, ""), orDefault(r.SyncKiB, " KiB"), orDefault(r.Concurrency, ""))},
		{"petrel", fmt.Sprintf("%.1f MiB/s (%d MiB in %.3f s, Send called at a -> file message received at b%s)", r.MiBPerSec, r.SizeMiB, r.Seconds, of)},
		{"send call", fmt.Sprintf("%.3f s (describe: SHA-256 of the file, and store)", r.SendSeconds)},
		{"handed over", fmt.Sprintf("%.3f s (Send called -> a's send queue empty)", r.HandedSeconds)},
	}
	if r.BaselineSeconds > 0 {
		figs = append(figs,
			figure{"baseline", fmt.Sprintf("%.1f MiB/s (%.3f s, disk -> loopback TCP -> disk, 1 MiB buffer, fsync at the end)", r.BaselineMiBPerSec, r.BaselineSeconds)},
			figure{"baseline fsync", fmt.Sprintf("%.3f s (the final fsync alone)", r.BaselineFsyncSeconds)},
			figure{"ratio", fmt.Sprintf("%.3f (petrel / baseline)", r.Ratio)})
	}
	if len(r.Runs) > 1 {
		for i, f := range r.Runs {
			v := fmt.Sprintf("petrel %.1f MiB/s (%.3f s)", f.MiBPerSec, f.Seconds)
			if f.BaselineSeconds > 0 {
				v += fmt.Sprintf(", baseline %.1f MiB/s (%.3f s), ratio %.3f", f.BaselineMiBPerSec, f.BaselineSeconds, f.Ratio)
			}
			figs = append(figs, figure{fmt.Sprintf("round %d", i+1), v})
		}
	}
	figs = append(figs, figure{"sha-256", r.SHA256 + " (checked at b)"})
	return append(figs, linkFigures{RSSMB: r.RSSMB, PeakRSSMB: r.PeakRSSMB}.rssFigures()...)
}
