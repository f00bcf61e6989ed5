package mqttgw

import (
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/petrelmq/petrel/internal/acceptretry"
)

// Accept errors. A process out of file descriptors for a moment (EMFILE:
// a flood of connections to any of the node's ports does it under a low
// `ulimit -n`) fails each Accept until some are closed. mochi's listeners
// return from Serve at the first Accept error, which left the port bound
// and its connections queued by the kernel, never accepted, until the
// node restarted, with nothing logged. The gateway's listeners accept
// through acceptretry instead: an error that passes is retried after a
// wait that doubles from 5 ms up to 1 s, counted, and logged at most once
// every acceptLogEvery per listener; the listener serves again as soon as
// descriptors are free. An error that does not pass ends the listener:
// it is logged as an error and the gateway's Err says so, which makes the
// node's /readyz answer 503.

// acceptLogEvery is how often, at most, the accept errors of one
// listener are logged, with the count of those not logged.
const acceptLogEvery = 10 * time.Second

// connectLogEvery is how often, at most, the connections closed past
// maxConnecting are logged.
const connectLogEvery = 10 * time.Second

// listenerKind tells the gateway's two listeners apart, in metrics and
// logs.
type listenerKind int

const (
	listenerTCP listenerKind = iota
	listenerWebSocket
	listenerKinds
)

// String is the kind's label in petrel_mqtt_accept_errors_total.
func (k listenerKind) String() string {
	if k == listenerWebSocket {
		return "websocket"
	}
	return "tcp"
}

// listen binds address, and accepts on it through the errors that pass.
func (g *Gateway) listen(address string, kind listenerKind) (*acceptretry.Listener, error) {
	ln, err := net.Listen("tcp", address)
	if err != nil {
		return nil, err
	}
	return acceptretry.New(ln, func(err error, wait time.Duration) {
		g.metrics.acceptErrors[kind].Add(1)
		if held, ok := g.acceptLog.Allow(kind.String()); ok {
			g.log.Warn("mqtt accept failed; retrying",
				slog.String("listener", kind.String()), slog.String("addr", ln.Addr().String()),
				slog.Any("error", err), slog.Duration("retry_in", wait), slog.Int64("held_back", held))
		}
	}), nil
}

// listenerStopped notes that the listener id stopped serving while the
// gateway was not closing, because of err: it accepts no more
// connections, and the gateway is not whole.
func (g *Gateway) listenerStopped(id, addr string, err error) {
	if err == nil {
		err = fmt.Errorf("it returned with no error")
	}
	g.log.Error("mqtt listener stopped accepting connections; restart the node to serve it again",
		slog.String("listener", id), slog.String("addr", addr), slog.Any("error", err))
	why := fmt.Errorf("mqtt listener %s on %s stopped accepting connections: %w", id, addr, err)
	g.stopped.CompareAndSwap(nil, &why)
}

// Err returns why a listener of the gateway stopped accepting
// connections, other than by Close; nil while they all serve.
func (g *Gateway) Err() error {
	if p := g.stopped.Load(); p != nil {
		return *p
	}
	return nil
}
