package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// Exit statuses. Scripts and supervisors tell "you called me wrong" (2) from
// "I tried and failed" (1), as with the usual Unix tools.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// exitError carries the exit status of an error that is not a plain runtime
// failure. cobra returns every error the same way, so the commands mark the
// ones that are the caller's mistake.
type exitError struct {
	code int
	// usage asks for the command's usage after the message: it helps with a
	// bad flag, not with a bad line in a configuration file.
	usage bool
	err   error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageErrorf reports a bad flag, argument or command: exit 2, with usage.
func usageErrorf(format string, args ...any) error {
	return &exitError{code: exitUsage, usage: true, err: fmt.Errorf(format, args...)}
}

// badInput reports input that petrel refuses, such as an invalid
// configuration file: exit 2, without usage, since the error already names
// the file and line to fix.
func badInput(err error) error {
	return &exitError{code: exitUsage, err: err}
}

// run executes the command line args and returns the exit status. It is
// main without os.Exit, so that nothing is hidden from the tests that run
// the binary.
func run(args []string, stdout, stderr io.Writer) int {
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(context.Background())
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(stderr, "petrel: %v\n", err)
	var ee *exitError
	if !errors.As(err, &ee) {
		return exitFailure
	}
	if ee.usage && cmd != nil {
		fmt.Fprintf(stderr, "\n%s", cmd.UsageString())
	}
	return ee.code
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "petrel",
		Short: "Petrel store-and-forward messaging: node daemon, demo and benchmarks",
		Long: `Petrel is store-and-forward messaging middleware. Every machine runs a node
that keeps messages durably in SQLite and forwards them hop by hop until they
reach the receive queue of their destination.

Exit status: 0 on success; 1 when a command fails at run time; 2 for a bad
command, flag or argument, or an invalid configuration file.`,
		Version: versionString(),
		// run prints errors and usage itself, once, to stderr, and only
		// for the errors where usage helps.
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &exitError{code: exitUsage, usage: true, err: err}
	})
	// The completion command would bring its own argument checks, whose
	// errors could not be told from runtime failures.
	root.CompletionOptions.DisableDefaultCmd = true
	parentCommand(root)
	root.AddCommand(newNodeCmd(), newDemoCmd(), newVersionCmd(), newBenchCmd(), newStatCmd(), newNodesCmd(), newSendfileCmd())
	root.AddCommand(newSendCmd(), newRecvCmd(), newQueuesCmd(), newPurgeCmd(), newDLQCmd(), newTopicsCmd(), newUnsubscribeCmd(), newChaosCmd())
	root.AddCommand(newSubscribeCmd())
	return root
}

// parentCommand makes cmd, which only groups subcommands, refuse an unknown
// subcommand with a usage error and show its help when called alone.
// Without this, cobra reports an unknown command as a plain error (exit 1)
// at the root and silently shows help (exit 0) below it.
func parentCommand(cmd *cobra.Command) {
	// cobra applies this default only where it reports the error itself.
	cmd.SuggestionsMinimumDistance = 2
	cmd.Args = func(c *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], c.CommandPath())
		if s := c.SuggestionsFor(args[0]); len(s) > 0 {
			msg += fmt.Sprintf(" (did you mean %q?)", s[0])
		}
		return usageErrorf("%s", msg)
	}
	cmd.RunE = func(c *cobra.Command, _ []string) error { return c.Help() }
}

// noArgs is cobra.NoArgs with a usage error.
func noArgs(c *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageErrorf("%q takes no arguments, got %q", c.CommandPath(), args)
	}
	return nil
}
