package mqttgw

import "time"

// SetConnectBounds sets the bounds on connections awaiting their CONNECT
// for a test, and returns what puts them back.
func SetConnectBounds(timeout time.Duration, conns, bytes int64) (restore func()) {
	b := &connectBounds
	t, c, n := b.timeout.Load(), b.conns.Load(), b.bytes.Load()
	b.timeout.Store(int64(timeout))
	b.conns.Store(conns)
	b.bytes.Store(bytes)
	return func() { b.timeout.Store(t); b.conns.Store(c); b.bytes.Store(n) }
}
