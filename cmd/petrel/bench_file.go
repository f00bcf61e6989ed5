package main

import (
	"context"
	"io"
	"time"

	"github.com/petrelmq/petrel/internal/bench"
	"github.com/spf13/cobra"
)

func newBenchFileCmd() *cobra.Command {
	var o bench.FileOptions
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
section; 0 keeps the default (512 KiB chunks, 16 in flight, a sync every
16 MiB, 4 files at once).

Everything lives in a temporary directory under --dir, removed at the end
(kept with --keep); every node process is stopped before the bench returns,
also on failure or SIGINT. PETREL_CPUPROFILE=prefix has a and b write CPU
profiles of their work to prefix.a.pprof and prefix.b.pprof, and with
--hops 2 the relay c (a petrel node, which honours the variable too) of
its whole life to prefix.c.pprof.`,
		Example: `  petrel bench file
  petrel bench file --size-mib 256 --hops 2 --json
  petrel bench file --runs 3 --chunk-kib 1024 --window 32`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBench(cmd, func(ctx context.Context, stdout, stderr io.Writer) error {
				return bench.RunFile(ctx, o, stdout, stderr)
			})
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.SizeMiB, "size-mib", 1024, "file size in MiB")
	f.IntVar(&o.Hops, "hops", 1, "links between sender and receiver: 1 (a -> b) or 2 (a -> c -> b)")
	f.IntVar(&o.Runs, "runs", 1, "rounds of baseline and transfer; the figures are the medians")
	f.IntVar(&o.ChunkKiB, "chunk-kib", 0, "chunk size in KiB (0: the node's default)")
	f.IntVar(&o.Window, "window", 0, "chunks in flight per transfer (0: the node's default)")
	f.IntVar(&o.SyncKiB, "sync-kib", 0, "KiB a receiver appends between two syncs, at most (0: the node's default)")
	f.IntVar(&o.Concurrency, "concurrency", 0, "files of one send queue moving at once (0: the node's default)")
	f.StringVar(&o.Dir, "dir", "", "make the bench directory in this `folder` (default: the system's temp folder)")
	f.BoolVar(&o.NoBaseline, "no-baseline", false, "skip the plain TCP copy")
	f.BoolVar(&o.KnownChecksum, "known-checksum", false, "give Send the file's SHA-256 (known from writing it), so that it does not read the file")
	f.BoolVar(&o.Keep, "keep", false, "keep the bench directory (configurations, data, stderr of each node)")
	f.DurationVar(&o.Timeout, "timeout", 30*time.Minute, "give up after this long")
	f.BoolVar(&o.JSON, "json", false, "print one JSON object on stdout")
	return cmd
}
