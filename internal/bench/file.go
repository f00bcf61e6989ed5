package bench

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"slices"
	"time"
)

// FileOptions are the flags of `bench file`.
// FileOptions are the flags of `bench file`. ChunkKiB, Window, SyncKiB
// and Concurrency are 0 for the node's defaults.
type FileOptions struct {
	Hops, SizeMiB, Runs    int
	ChunkKiB, Window       int
	SyncKiB, Concurrency   int
	Dir                    string
	JSON, NoBaseline, Keep bool
	// KnownChecksum gives Send the file's SHA-256, which it then does not
	// compute: what an application that already has it saves.
	KnownChecksum bool
	Timeout       time.Duration
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
	// KnownChecksum: Send was given the file's SHA-256 (--known-checksum)
	// and did not read the file.
	KnownChecksum bool `json:"known_checksum"`
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

func (o FileOptions) validate() error {
	if o.Hops != 1 && o.Hops != 2 {
		return usageErrorf("invalid argument %d for \"--hops\" flag: want 1 or 2", o.Hops)
	}
	if o.SizeMiB < 1 {
		return usageErrorf("invalid argument %d for \"--size-mib\" flag: want at least 1", o.SizeMiB)
	}
	if o.Runs < 1 {
		return usageErrorf("invalid argument %d for \"--runs\" flag: want at least 1", o.Runs)
	}
	for _, c := range []struct {
		flag string
		v    int
	}{{"chunk-kib", o.ChunkKiB}, {"window", o.Window}, {"sync-kib", o.SyncKiB}, {"concurrency", o.Concurrency}} {
		if c.v < 0 {
			return usageErrorf("invalid argument %d for \"--%s\" flag: want 0 (the default) or more", c.v, c.flag)
		}
	}
	// A chunk travels in one Data frame, at most the link's max_frame
	// (16 MiB by default), with the packet's header.
	if o.ChunkKiB > 16<<10-1 {
		return usageErrorf("invalid argument %d for \"--chunk-kib\" flag: want at most %d (below the 16 MiB frame)", o.ChunkKiB, 16<<10-1)
	}
	if err := checkTimeout(o.Timeout); err != nil {
		return err
	}
	return checkDir(o.Dir)
}

// RunFile runs `bench file`: the source file, then o.Runs rounds of
// baseline copy and transfer between node processes. It prints the
// figures, or one JSON object with o.JSON, on stdout, and progress on
// stderr.
func RunFile(ctx context.Context, o FileOptions, stdout, stderr io.Writer) error {
	if err := o.validate(); err != nil {
		return err
	}
	b := procBench{name: "file", parent: o.Dir, keep: o.Keep, timeout: o.Timeout, json: o.JSON}
	return b.run(ctx, stdout, stderr, func(ctx, life context.Context, exe, dir string) (figurer, error) {
		fb := &fileBench{o: o, exe: exe, dir: dir, progress: stderr, life: life}
		return fb.run(ctx)
	})
}

// newFileResult fills the figures that do not depend on the run.
func newFileResult(o FileOptions) *fileResult {
	return &fileResult{
		Scenario: "file", Hops: o.Hops, SizeMiB: o.SizeMiB, ChunkKiB: o.ChunkKiB, Window: o.Window,
		SyncKiB: o.SyncKiB, Concurrency: o.Concurrency, KnownChecksum: o.KnownChecksum, RSSMB: map[string]float64{}, Pids: map[string]int{},
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
		{"send call", fmt.Sprintf("%.3f s (%s)", r.SendSeconds, sendWhat(r.KnownChecksum))},
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

// sendWhat says what the Send call did.
func sendWhat(known bool) string {
	if known {
		return "given the SHA-256: stat the file, and store"
	}
	// The file goes to another node: Send stores it first and returns
	// once it has the SHA-256, read while the transfer already runs.
	return "stat and store, then the SHA-256 of the file, beside the transfer"
}
