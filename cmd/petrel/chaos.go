package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/petrelmq/petrel/internal/chaos"
	"github.com/spf13/cobra"
)

// chaosOptions are the flags of `petrel chaos`.
type chaosOptions struct {
	Nodes                                     int
	Duration, KillEvery, FlapEvery, PartEvery time.Duration
	// Rate is each node's messages per second.
	Rate float64
	// FileEvery makes every FileEvery-th message a file of FileSize bytes.
	FileEvery, FileSize int
	Seed                uint64
	JSON                bool
	// Dir keeps the nodes' files there instead of a temporary directory
	// removed at the end.
	Dir string
	// Exe is the petrel binary the nodes run; the running one by default.
	Exe string
}

func newChaosCmd() *cobra.Command {
	var o chaosOptions
	cmd := &cobra.Command{
		Use:   "chaos [--nodes 3] [--duration 10m] [--kill-every 5s] [--flap-every 3s] [--json]",
		Short: "Run real nodes under traffic while killing them and cutting their links, then check every message",
		Long: `Run --nodes petrel nodes as child processes, in a full mesh whose every
link goes through an in-process fault-injecting proxy (toxiproxy), and keep
traffic flowing for --duration: each node sends --rate messages a second,
of mixed priorities, to the next node's queue "chaos", sends every
--file-every-th as a file message of --file-size bytes to that queue
instead, and publishes every third to the topic events.all, which every
node subscribes to durably.

Meanwhile, every --kill-every a random node is killed with SIGKILL and
restarted on its data directory; every --flap-every a random link drops for
0.2 to 2 s; every --partition-every a random node is cut off from all the
others, silently, for 1 to 5 s. 0 turns a fault off.

Then the faults stop, the nodes are killed a last time and restarted, and
once every send queue and topic inbox is empty they are stopped and their
stores read. Each message a producer was told was durable must be stored
exactly once at its queue or at every subscription (a file whole, with
the content sent), nothing must be stored
that no producer sent, and each producer's messages of one priority must
come out in the order it sent them. The counts are printed per producer,
kind and priority (one JSON object with --json); the exit status is 1 if
any is lost, duplicated, unexpected or out of order.`,
		Example: `  petrel chaos --nodes 3 --duration 10m --kill-every 5s --flap-every 3s --json`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Exe == "" {
				exe, err := os.Executable()
				if err != nil {
					return err
				}
				o.Exe = exe
			}
			if err := o.validate(); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			res, err := runChaos(ctx, o, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if o.JSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				enc.Encode(res)
			} else {
				printChaos(cmd.OutOrStdout(), res)
			}
			if !res.Pass {
				t := res.Check.Total
				return fmt.Errorf("chaos: %d messages lost, %d duplicated, %d unexpected, %d out of order, %d corrupt (message or file); %d nodes ended by themselves",
					t.Lost, t.Duplicated, t.Unexpected, t.OutOfOrder, t.Corrupt, res.Crashed)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Nodes, "nodes", 3, "nodes to run, 2 or more")
	f.DurationVar(&o.Duration, "duration", 10*time.Minute, "how `long` traffic and faults go on")
	f.DurationVar(&o.KillEvery, "kill-every", 5*time.Second, "kill and restart a random node this `often` (0: never)")
	f.DurationVar(&o.FlapEvery, "flap-every", 3*time.Second, "drop a random link this `often` (0: never)")
	f.DurationVar(&o.PartEvery, "partition-every", 20*time.Second, "cut a random node off this `often` (0: never)")
	f.Float64Var(&o.Rate, "rate", 100, "messages per second each node sends")
	f.IntVar(&o.FileEvery, "file-every", 47, "send every `n`-th message as a file (0: no files); a prime, so files take every priority")
	f.IntVar(&o.FileSize, "file-size", 16<<10, "size of those files in `bytes`")
	f.Uint64Var(&o.Seed, "seed", 0, "seed of the fault schedule (0: from the clock; printed to replay)")
	f.BoolVar(&o.JSON, "json", false, "print the result as one JSON object")
	f.StringVar(&o.Dir, "dir", "", "keep the nodes' configuration, data and logs in this `directory`")
	f.StringVar(&o.Exe, "exe", "", "the petrel `binary` the nodes run (default: this one)")
	f.MarkHidden("exe")
	return cmd
}

func (o chaosOptions) validate() error {
	switch {
	case o.Nodes < 2 || o.Nodes > 16:
		return usageErrorf("invalid argument %d for \"--nodes\" flag: want 2 to 16", o.Nodes)
	case o.Duration <= 0:
		return usageErrorf("invalid argument %v for \"--duration\" flag: want more than 0", o.Duration)
	case o.KillEvery < 0 || o.FlapEvery < 0 || o.PartEvery < 0:
		return usageErrorf("the fault periods are 0 (off) or more")
	case o.FileEvery < 0 || (o.FileEvery > 0 && o.FileSize < 1):
		return usageErrorf("--file-every is 0 (no files) or more, with a --file-size of 1 or more")
	case o.Rate <= 0:
		return usageErrorf("invalid argument %v for \"--rate\" flag: want more than 0", o.Rate)
	}
	return nil
}

// chaosResult is what `petrel chaos` prints.
type chaosResult struct {
	Seed      uint64  `json:"seed"`
	Nodes     int     `json:"nodes"`
	Duration  string  `json:"duration"`
	Rate      float64 `json:"rate_per_node"`
	Kills     int     `json:"kills"`
	Flaps     int     `json:"flaps"`
	Parts     int     `json:"partitions"`
	Attempted int     `json:"attempted"`
	// Crashed counts the nodes that ended by themselves; each is a fault of
	// Petrel, and fails the run.
	Crashed   int           `json:"crashed"`
	SettleFor string        `json:"settled_in"`
	Check     *chaos.Report `json:"check"`
	Pass      bool          `json:"pass"`
	Errors    []string      `json:"errors,omitempty"`
}

func printChaos(w io.Writer, r *chaosResult) {
	fmt.Fprintf(w, "chaos: %d nodes, %s, %.0f msg/s per node, seed %d\n", r.Nodes, r.Duration, r.Rate, r.Seed)
	fmt.Fprintf(w, "faults: %d kills, %d link flaps, %d partitions; %d nodes ended by themselves; settled in %s\n",
		r.Kills, r.Flaps, r.Parts, r.Crashed, r.SettleFor)
	t := r.Check.Total
	fmt.Fprintf(w, "messages: %d attempted, %d ok'd copies due, %d stored; lost %d, duplicated %d, unexpected %d, out of order %d\n",
		r.Attempted, t.Ok, t.Stored, t.Lost, t.Duplicated, t.Unexpected, t.OutOfOrder)
	groups := slices.Sorted(func(yield func(string) bool) {
		for g := range r.Check.Groups {
			if !yield(g) {
				return
			}
		}
	})
	fmt.Fprintf(w, "%-20s %8s %8s %6s %6s %6s %6s %6s\n", "producer kind prio", "ok", "stored", "lost", "dup", "unexp", "order", "corrupt")
	for _, g := range groups {
		c := r.Check.Groups[g]
		fmt.Fprintf(w, "%-20s %8d %8d %6d %6d %6d %6d %6d\n", g, c.Ok, c.Stored, c.Lost, c.Duplicated, c.Unexpected, c.OutOfOrder, c.Corrupt)
	}
	for _, e := range r.Check.Examples {
		fmt.Fprintln(w, "  "+e)
	}
	for _, e := range r.Errors {
		fmt.Fprintln(w, "error: "+e)
	}
	if r.Pass {
		fmt.Fprintln(w, "PASS")
	} else {
		fmt.Fprintln(w, "FAIL")
	}
}
