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

	petrel "github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/queue"
)

// The baselines a bench measures in its own invocation, beside its figure:
// the machine is shared and its disk speed varies from run to run, so a
// target is a ratio to what this machine did a moment ago, never an
// absolute rate.

// baseline is what every cross-process bench prints beside its figure.
type baseline struct {
	// LocalMsgsPerSec is `bench local`'s durable enqueue rate (64
	// producers, window 1024) on an embedded node in the bench directory,
	// with the bench's sync mode, message size and count (at most
	// --baseline-messages; 0 when that is 0).
	LocalMsgsPerSec float64 `json:"baseline_local_msgs_per_sec"`
	// FsyncP50us is the median latency of a 4 KiB write and fsync of a file
	// in the bench directory: what one group commit costs at least.
	FsyncP50us float64 `json:"fsync_p50_us"`
}

// DefaultBaselineMessages bounds the baseline's run (--baseline-messages):
// a few seconds are enough to know the local rate, whatever the bench
// itself sends.
const DefaultBaselineMessages = 200_000

// fsyncSamples is how many write+fsync pairs measureFsync times.
const fsyncSamples = 200

// measureBaseline measures the baselines in dir, before the bench's own
// processes start, so that they do not compete with it: the fsync latency,
// and the local enqueue rate over min(messages, limit) messages, none
// when limit is 0.
func measureBaseline(ctx context.Context, dir, sync string, messages, limit, size int, progress io.Writer) (baseline, error) {
	fsync, err := measureFsync(dir)
	if err != nil {
		return baseline{}, err
	}
	b := baseline{FsyncP50us: round(float64(fsync)/float64(time.Microsecond), 1)}
	n := min(messages, limit)
	if n <= 0 {
		return b, nil
	}
	fmt.Fprintf(progress, "baseline: local enqueue of %d messages...\n", n)
	local, err := measureLocalEnqueue(ctx, filepath.Join(dir, "baseline"), sync, n, size)
	if err != nil {
		return baseline{}, fmt.Errorf("baseline: %w", err)
	}
	b.LocalMsgsPerSec = round(local, 2)
	return b, nil
}

// measureFsync returns the median of fsyncSamples writes of 4 KiB, each
// followed by fsync, to one file in dir; the file is removed.
func measureFsync(dir string) (d time.Duration, err error) {
	f, err := os.CreateTemp(dir, "fsync-*")
	if err != nil {
		return 0, fmt.Errorf("measure fsync: %w", err)
	}
	defer func() { err = errors.Join(err, f.Close(), os.Remove(f.Name())) }()
	buf := make([]byte, 4096)
	lat := make(latencies, 0, fsyncSamples)
	for i := range fsyncSamples {
		buf[0] = byte(i)
		start := time.Now()
		if _, err := f.WriteAt(buf, int64(i)*int64(len(buf))); err != nil {
			return 0, fmt.Errorf("measure fsync: %w", err)
		}
		if err := f.Sync(); err != nil {
			return 0, fmt.Errorf("measure fsync: %w", err)
		}
		lat = append(lat, time.Since(start))
	}
	return lat.percentiles(50)[0], nil
}

// measureLocalEnqueue runs `bench local`'s workload with its default
// producers, window and consumers on an embedded node in dir, removed
// after, and returns its enqueue rate.
func measureLocalEnqueue(ctx context.Context, dir, sync string, messages, size int) (rate float64, err error) {
	mode, err := parseSync(sync)
	if err != nil {
		return 0, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, os.RemoveAll(dir)) }()
	node, err := petrel.Open(ctx, petrel.Config{Name: "baseline", DataDir: dir,
		Store:  queue.Config{Sync: mode},
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, node.Close()) }()
	o := LocalOptions{Producers: 64, Consumers: 4, Window: 1024, Messages: messages, Size: size, Sync: sync}
	res, err := measureLocal(ctx, node, o, io.Discard)
	if err != nil {
		return 0, err
	}
	return res.EnqueueMsgsPerSec, nil
}

// ratio is value / base, 0 when there is no base.
func ratio(value, base float64) float64 {
	if base <= 0 {
		return 0
	}
	return round(value/base, 3)
}

// baselineFigures are the lines every bench with a baseline prints.
func (b baseline) figures(name string, value float64) []figure {
	return b.ratioFigures(name, ratio(value, b.LocalMsgsPerSec))
}

// ratioFigures is figures with the ratio given: a median of several
// rounds' ratios is not the ratio of their medians.
func (b baseline) ratioFigures(name string, r float64) []figure {
	return []figure{
		{"baseline local", fmt.Sprintf("%.0f msgs/s (bench local enqueue, same run)", b.LocalMsgsPerSec)},
		{"ratio", fmt.Sprintf("%.2fx local enqueue (%s)", r, name)},
		{"fsync p50", fmt.Sprintf("%.0f us (4 KiB write + fsync in the bench directory)", b.FsyncP50us)},
	}
}

// RawBaselineMaxBytes caps the bytes of the raw-copy baseline: enough for
// the copy to run at its steady rate, past its connection and final
// fsync, without writing gigabytes for a long run (three times: the
// source file and two copies).
const RawBaselineMaxBytes = 256 << 20

// rawBaseline is the ceiling of a bench that moves bytes between
// processes: `bench file`'s plain copy, disk -> loopback TCP -> disk.
type rawBaseline struct {
	// RawMiBPerSec is the faster of two plain copies of RawBytes random
	// bytes from a file in the bench directory over one loopback TCP
	// connection to another, fsynced at the end; 0 when skipped.
	RawMiBPerSec float64 `json:"baseline_raw_mib_per_sec"`
	RawBytes     int64   `json:"baseline_raw_bytes"`
}

// measureRawCopy writes n random bytes to a file in dir and copies it as
// bench file's baseline does, the faster of two copies; it removes both
// files. n of 0 or less measures nothing.
func measureRawCopy(ctx context.Context, dir string, n int64, progress io.Writer) (b rawBaseline, err error) {
	if n <= 0 {
		return rawBaseline{}, nil
	}
	raw := filepath.Join(dir, "raw")
	defer func() { err = errors.Join(err, os.RemoveAll(raw)) }()
	fmt.Fprintf(progress, "baseline: raw copy of %.1f MiB over one loopback TCP connection, twice...\n", float64(n)/(1<<20))
	src := filepath.Join(raw, "src.bin")
	if _, err := writeBenchFile(ctx, src, n); err != nil {
		return rawBaseline{}, fmt.Errorf("raw baseline: %w", err)
	}
	d, _, err := fasterCopy(ctx, src, filepath.Join(raw, "copy.bin"), n)
	if err != nil {
		return rawBaseline{}, fmt.Errorf("raw baseline: %w", err)
	}
	return rawBaseline{RawMiBPerSec: round(mibPerSec(n, d), 2), RawBytes: n}, nil
}

// mibPerSec returns n bytes per second over d in MiB/s; zero for an empty
// d.
func mibPerSec(n int64, d time.Duration) float64 {
	return rate(n, d) / (1 << 20)
}

// figures are the lines of the raw baseline beside value, in MiB/s; none
// when it was skipped.
func (b rawBaseline) figures(name string, value float64) []figure {
	return b.ratioFigures(name, ratio(value, b.RawMiBPerSec))
}

// ratioFigures is figures with the ratio given, as baseline's.
func (b rawBaseline) ratioFigures(name string, r float64) []figure {
	if b.RawMiBPerSec <= 0 {
		return nil
	}
	return []figure{
		{"baseline raw", fmt.Sprintf("%.1f MiB/s (%.1f MiB disk -> loopback TCP -> disk, faster of two copies, fsync at the end; same run)",
			b.RawMiBPerSec, float64(b.RawBytes)/(1<<20))},
		{"ratio raw", fmt.Sprintf("%.3fx raw copy (%s)", r, name)},
	}
}
