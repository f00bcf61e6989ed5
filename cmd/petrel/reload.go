package main

import (
	"context"
	"log/slog"
	"slices"
	"time"

	petrel "github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/conf"
	"github.com/petrelmq/petrel/internal/logkey"
)

// watchConfig reloads the configuration file when it changes and applies
// what can change live to node; a bad edit keeps the running configuration.
// running is the File node was opened with: what was saved since is applied
// at once. The state goes to node's status, for `petrel stat`. Close the
// returned watcher to stop.
func watchConfig(ctx context.Context, path string, running *conf.File, node *petrel.Node, log *slog.Logger, level *slog.LevelVar) (*conf.Watcher, error) {
	state := petrel.ConfigStatus{Source: path, Version: 1, LoadedAt: time.Now()}
	node.SetConfigStatus(state)
	return conf.Watch(path, conf.WatchOptions{
		Logger:  log,
		Running: running,
		OnChange: func(_, next *conf.File, diff conf.Diff) error {
			cfg := next.NodeConfig()
			cfg.Logger, cfg.ConfigSource = log, path
			r, err := node.Reconfigure(ctx, cfg)
			// The node applies its sections; the log level is this
			// process's, and applied here, so it is named here too.
			applied := r.Applied
			if err == nil && slices.Contains(diff.Changed, conf.SectionLog) {
				level.Set(next.Log.Level)
				applied = append(slices.Clone(applied), conf.SectionLog)
				// The node's own line ("configuration applied") cannot
				// name it: this one does, at the level now in force.
				log.Info("log level applied", slog.String("log_level", next.Log.Level.String()))
			}
			if err != nil {
				// Reconfigure applied none of it; the watcher offers the
				// change again at the next save or touch.
				log.Error("configuration reload not applied", slog.Any(logkey.Error, err))
				state.LastError = err.Error()
				node.SetConfigStatus(state)
				return err
			}
			state.Version++
			state.LoadedAt = time.Now()
			state.LastError = ""
			// conf names the keys of the file; the node's list says the same
			// by section.
			state.NeedsRestart = diff.Restart
			if len(state.NeedsRestart) > 0 {
				log.Warn("configuration reloaded; some changes need a restart and were not applied",
					slog.Any("applied", applied), slog.Any("needs_restart", state.NeedsRestart))
			}
			node.SetConfigStatus(state)
			return nil
		},
		OnError: func(err error) {
			// The watcher logged it already.
			state.LastError = err.Error()
			node.SetConfigStatus(state)
		},
		OnCleared: func() {
			// The file is back to what runs: nothing is refused any more.
			state.LastError = ""
			node.SetConfigStatus(state)
		},
	})
}
