package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	petrel "github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/conf"
	"github.com/petrelmq/petrel/internal/bench"
	"github.com/petrelmq/petrel/internal/nodeproc"
	"github.com/spf13/cobra"
)

func newNodeCmd() *cobra.Command {
	var cfgPath string
	cmd := &cobra.Command{
		Use:   "node [-c file]",
		Short: "Run a Petrel node until SIGINT or SIGTERM",
		Long: `Run a Petrel node in the foreground.

With -c, the node is configured by that YAML file; without it, it starts on
the built-in defaults (node name from the host name, data in ./petrel-data).

Once the node is open, one line goes to stdout:

  ready node=<name> id=<unique id> data_dir=<absolute path> [listen=<host:port>] [admin=<host:port>] [role=live|backup] [mqtt=<host:port>]

admin= is the admin HTTP endpoint (/healthz, /readyz, /metrics, /api/status),
served only when the file sets admin.listen; mqtt= the MQTT listener, only
when the file sets mqtt.listen.

With ha: {role: backup} in the file, the node first prints

  waiting role=backup node=<name> data_dir=<dir>

and waits for the data directory's lock held by the live node; its ready
line, once it took over, ends with role=backup. A live node whose lock is
held exits 1 without opening anything.

Logs go to stderr, in the format and at the level of the file's log section.
SIGINT or SIGTERM stops the node cleanly: what was submitted is committed
and the store is closed. A second signal kills the process at once.

Exit status: 0 after a clean stop; 2 if the configuration file is invalid
(the error names file:line:column, the field and the reason); 1 if the file
cannot be read or the node fails to start or stop.`,
		Example: `  petrel node
  petrel node -c /etc/petrel/petrel.yaml`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runNode(cmd.Context(), cfgPath, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVarP(&cfgPath, "config", "c", "", "YAML configuration `file` (default: built-in defaults)")
	return cmd
}

func runNode(ctx context.Context, cfgPath string, stdout, stderr io.Writer) error {
	file, err := loadConfig(cfgPath)
	if err != nil {
		return err
	}
	level := new(slog.LevelVar)
	log := file.NewLoggerLevel(stderr, level)
	cfg := file.NodeConfig()
	cfg.Logger = log
	cfg.ConfigSource = cfgPath

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if cfg.HA.Role == petrel.HARoleBackup {
		// Open waits for the live's lock, possibly for days: say so, so
		// that an operator (or a test) knows the process is up.
		fmt.Fprintf(stdout, "waiting role=backup node=%s data_dir=%s\n", cfg.Name, nodeproc.QuoteValue(cfg.DataDir))
	}
	// A backup may wait for the lock for days, while the operator edits
	// the file on both machines: once it holds the lock it opens with the
	// file as it is then. The watcher below starts from the file the node
	// runs, so that whatever the node does not run is reloaded or reported.
	running := file
	takeover := func(c petrel.Config) (petrel.Config, error) {
		if cfgPath == "" || c.HA.Role != petrel.HARoleBackup {
			return c, nil
		}
		f, err := conf.Load(cfgPath)
		if err != nil {
			// The watcher reports it as a refused reload, and the node
			// serves with the file it started with until a good save.
			return c, nil
		}
		next := f.NodeConfig()
		if next.DataDir != c.DataDir || next.HA != c.HA {
			// The lock is that of the file read at start: the watcher
			// reports these keys as needing a restart.
			return c, nil
		}
		running = f
		log = f.NewLoggerLevel(stderr, level)
		next.Logger, next.ConfigSource = log, cfgPath
		return next, nil
	}
	node, err := petrel.OpenReloaded(ctx, cfg, takeover)
	if err != nil && cfg.HA.Role == petrel.HARoleBackup && ctx.Err() != nil {
		// A backup stopped while it waited opened nothing: a clean stop.
		log.Info("signal received while waiting for the ha lock; stopping")
		return nil
	}
	if err != nil {
		return err
	}
	stopProfile, err := bench.CPUProfile(node.Name())
	if err != nil {
		node.Close()
		return err
	}
	defer stopProfile()
	dataDir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		dataDir = cfg.DataDir
	}
	ready := fmt.Sprintf("ready node=%s id=%s data_dir=%s", node.Name(), node.ID(), nodeproc.QuoteValue(dataDir))
	if addr := node.ListenAddr(); addr != "" {
		ready += " listen=" + addr
	}
	if addr := node.AdminAddr(); addr != "" {
		ready += " admin=" + addr
	}
	if ha, ok := node.HA(); ok {
		ready += " role=" + string(ha.Role)
	}
	if addr := node.MQTTAddr(); addr != "" {
		ready += " mqtt=" + addr
	}
	if cfgPath != "" {
		w, err := watchConfig(ctx, cfgPath, running, node, log, level)
		if err != nil {
			node.Close()
			return fmt.Errorf("watch %s: %w", cfgPath, err)
		}
		defer w.Close()
	}
	fmt.Fprintln(stdout, ready)

	<-ctx.Done()
	// Restore the default handlers: an operator who signals again while
	// the store closes wants the process gone now.
	stop()
	log.Info("signal received, stopping node")
	if err := node.Close(); err != nil {
		return fmt.Errorf("stop node: %w", err)
	}
	return nil
}

// loadConfig returns the file at path, or the defaults when path is empty
// so that a node starts with no file at all. An invalid file is bad input
// (exit 2); a file that cannot be read is a runtime failure (exit 1).
func loadConfig(path string) (*conf.File, error) {
	if path == "" {
		return conf.Default(), nil
	}
	f, err := conf.Load(path)
	if errors.Is(err, conf.ErrInvalid) {
		return nil, badInput(err)
	}
	return f, err
}
