package receiver

import (
	"context"

	"github.com/petrelmq/petrel/queue"
	"go.uber.org/fx"
)

// Module provides a *Server from a Config, a store and a Router. It starts
// listening with the application (when Config.Listen is set) and stops,
// closing its connections, when the application stops.
var Module = fx.Module("receiver",
	fx.Provide(newForFx),
)

func newForFx(lc fx.Lifecycle, cfg Config, store *queue.Store, router Router) *Server {
	s := New(cfg, store, router)
	lc.Append(fx.Hook{
		OnStart: func(context.Context) error {
			if cfg.Listen == "" {
				return nil
			}
			return s.Start()
		},
		OnStop: func(context.Context) error { return s.Stop() },
	})
	return s
}
