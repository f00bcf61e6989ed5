package sender

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/petrelmq/petrel/internal/logkey"
)

// A send queue outlives the route to its node: a neighbour removed by a
// reload, a route removed, a discovered node forgotten. Its sender finds
// no next hop, and used to try again after each backoff, at most
// ReconnectMax, logging a warning every time: a hundred such queues wrote
// over a hundred lines a second, for as long as no route returned.
//
// Trying again is of no use until the routes or the directory change, and
// both say when they do: the directory closes its Changed channel, and
// the node calls Manager.Rehop once it installed new routes. So such a
// sender waits for either, or for noRouteWait, and the lack of a route is
// logged once per dialLogEvery per node, whatever the number of queues
// toward it.

// noRouteWait is the longest wait of a sender whose node has no route, a
// random one in [noRouteWait/2, noRouteWait]. It is woken as soon as a
// route may have come back, so this only bounds the cost of a change it
// was not told of.
const noRouteWait = 30 * time.Second

// noRouteError is the failure of a sender whose node has no route. It
// carries the channels, taken before the next hop was resolved, that are
// closed when the answer may have changed.
type noRouteError struct {
	node       string
	dirChanged <-chan struct{} // the directory changed (nil without one)
	rehopped   <-chan struct{} // the routes changed (Manager.Rehop)
}

func (e *noRouteError) Error() string { return fmt.Sprintf("no route to node %q", e.node) }

// resolveHop returns the next hop toward the sender's node, or a
// noRouteError.
func (s *Sender) resolveHop() (string, error) {
	// Taken first, so that a change while the hop is resolved wakes the
	// wait that follows a failure.
	dirChanged, rehopped := s.pool.routesChanged()
	if hop, ok := s.hop(s.dest); ok {
		return hop, nil
	}
	return "", &noRouteError{node: s.dest, dirChanged: dirChanged, rehopped: rehopped}
}

// pause waits wait after the failure err, and reports false if ctx ended
// meanwhile. A sender without a route stops waiting as soon as one may
// have come back.
func (s *Sender) pause(ctx context.Context, wait time.Duration, err error) bool {
	var dirChanged, rehopped <-chan struct{}
	if nr := (*noRouteError)(nil); errors.As(err, &nr) {
		dirChanged, rehopped = nr.dirChanged, nr.rehopped
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
	case <-dirChanged:
	case <-rehopped:
	}
	return true
}

// logNoRoute logs err, a lack of route, once per dialLogEvery for all
// the senders toward its node, and at debug level otherwise. It reports
// false if err is not a lack of route.
func (s *Sender) logNoRoute(err error, wait time.Duration) bool {
	if !errors.As(err, new(*noRouteError)) {
		return false
	}
	attrs := []any{slog.String(logkey.Node, s.dest), slog.Duration("wait", wait), slog.Any(logkey.Error, err)}
	if held, ok := s.pool.noRouteLog.Allow(s.dest); ok {
		if others, ok := s.pool.lines.Allow(); ok {
			s.log.Warn("no route to node; its send queues keep their messages and wait for one (logged once per 30s per node, 20 lines per 30s in all)",
				append(attrs, slog.Int64("suppressed", held), slog.Int64("suppressed_all_nodes", others))...)
			return true
		}
	}
	s.log.Debug("no route to node; waiting for one", attrs...)
	return true
}
