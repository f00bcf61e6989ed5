package main

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/petrelmq/petrel/internal/demo"
	"github.com/spf13/cobra"
)

func newDemoCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "demo",
		Short: "Show Petrel's embedding API at work, and check what it shows",
		Long: `Run a short, self-checking tour of the embedding API.

The demo opens an embedded node in a temporary data directory (removed
afterwards) and, step by step: sends command and data messages of mixed
priorities, some with a short TTL; lets those expire; consumes the rest with
Poll, Receive and Listen, each in priority order; shows that the expired ones
never arrived; and nacks a message until it is dead-lettered. Then it starts
three nodes on loopback, A, C and B, where C relays for B; sends mixed
priorities from A to B across C; and cuts the A-C link twice while A sends,
to show that every message still arrives exactly once.

Every claim the demo prints is checked. It exits 0 when all checks pass and 1
as soon as one fails. Node logs at warn and above go to stderr.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return demo.Run(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
}
