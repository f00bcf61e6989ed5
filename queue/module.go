package queue

import (
	"context"

	"go.uber.org/fx"
)

// Module provides a *Store from a Config. The store opens when the module
// is constructed, starts with the application and closes when it stops.
var Module = fx.Module("queue",
	fx.Provide(newForFx),
)

func newForFx(lc fx.Lifecycle, cfg Config) (*Store, error) {
	s, err := New(context.Background(), cfg)
	if err != nil {
		return nil, err
	}
	lc.Append(fx.Hook{
		OnStart: func(context.Context) error { s.Start(); return nil },
		OnStop:  func(context.Context) error { return s.Close() },
	})
	return s, nil
}
