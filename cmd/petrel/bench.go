package main

import (
	"github.com/petrelmq/petrel/queue"
	"github.com/spf13/cobra"
)

func newBenchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure Petrel's throughput, latency and memory",
		Long: `Measure Petrel's throughput, latency and memory on this machine.

Each subcommand is one scenario. Human output is one line per figure; with
--json, stdout holds exactly one JSON object and progress goes to stderr.
Rates are messages per second, latencies milliseconds, memory the process's
peak resident set size (VmHWM) in MiB.`,
	}
	parentCommand(cmd)
	cmd.AddCommand(newBenchLocalCmd())
	cmd.AddCommand(newBenchLinkCmd(), newBenchAgentCmd(), newBenchClientCmd())
	cmd.AddCommand(newBenchFileCmd())
	return cmd
}

// parseSync reads a --sync flag as the config file spells the modes.
func parseSync(s string) (queue.SyncMode, error) {
	switch s {
	case "full":
		return queue.SyncFull, nil
	case "normal":
		return queue.SyncNormal, nil
	}
	return 0, usageErrorf("invalid argument %q for \"--sync\" flag: want full or normal", s)
}
