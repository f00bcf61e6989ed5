package conf

import (
	"time"

	petrel "github.com/petrelmq/petrel"
)

// maxFrame is the longest frame the wire can carry: its length field is 32
// bits.
const maxFrame = 1<<32 - 1

// LinkSection tunes sessions and senders (petrel.LinkConfig). Zero values
// mean the defaults of the packages that run links.
type LinkSection struct {
	Window           int      `yaml:"window"`
	WindowBytes      Size     `yaml:"window_bytes"`
	MaxFrame         Size     `yaml:"max_frame"`
	HandshakeTimeout Duration `yaml:"handshake_timeout"`
	WriteTimeout     Duration `yaml:"write_timeout"`
	IdleTimeout      Duration `yaml:"idle_timeout"`
	ReconnectMin     Duration `yaml:"reconnect_min"`
	ReconnectMax     Duration `yaml:"reconnect_max"`
	StallAfter       Duration `yaml:"stall_after"`
	// The bounds on inbound connections and their buffers; see the
	// README's "Bounded resources".
	MaxHandshakes      int  `yaml:"max_handshakes"`
	MaxHandshakesPerIP int  `yaml:"max_handshakes_per_ip"`
	MaxConnections     int  `yaml:"max_connections"`
	MaxConnBuffer      Size `yaml:"max_conn_buffer_bytes"`
	// The bounds on the bytes remote clients' consumers hold leased.
	MaxSubscriptionHeld Size `yaml:"max_subscription_held_bytes"`
	MaxHeld             Size `yaml:"max_held_bytes"`
	// The bounds on what one client identity holds open.
	MaxSessionsPerIdentity    int `yaml:"max_sessions_per_identity"`
	MaxConnectionsPerIdentity int `yaml:"max_connections_per_identity"`
}

// defaultMaxFrame is the session package's default frame bound, which
// max_conn_buffer_bytes is checked against when max_frame is left out.
const defaultMaxFrame = 16 << 20

func (s *LinkSection) check(c *checker, path string) {
	c.atLeast(join(path, "window"), int64(s.Window), 1)
	if wb := join(path, "window_bytes"); c.has(wb) && s.WindowBytes <= 0 {
		c.fail(wb, reasonf(nil, "must be more than 0, got %s", s.WindowBytes))
	}
	frame := join(path, "max_frame")
	if c.has(frame) && (s.MaxFrame <= 0 || s.MaxFrame > maxFrame) {
		c.fail(frame, reasonf(nil, "must be more than 0 and at most 4GiB-1, the most a frame header carries; got %s (leave it out for the default)", s.MaxFrame))
	}
	c.fitsInt(frame, s.MaxFrame)
	c.positive(join(path, "handshake_timeout"), s.HandshakeTimeout)
	c.positive(join(path, "write_timeout"), s.WriteTimeout)
	c.positive(join(path, "idle_timeout"), s.IdleTimeout)
	c.positive(join(path, "reconnect_min"), s.ReconnectMin)
	c.positive(join(path, "reconnect_max"), s.ReconnectMax)
	c.positive(join(path, "stall_after"), s.StallAfter)
	// Only when both are written: the defaults are the sender's, and conf
	// does not repeat them.
	if s.ReconnectMin > 0 && s.ReconnectMax > 0 && s.ReconnectMin > s.ReconnectMax {
		c.fail(join(path, "reconnect_min"), reasonf(nil, "%s is more than reconnect_max %s", s.ReconnectMin, s.ReconnectMax))
	}
	c.atLeast(join(path, "max_handshakes"), int64(s.MaxHandshakes), 1)
	c.atLeast(join(path, "max_handshakes_per_ip"), int64(s.MaxHandshakesPerIP), 1)
	c.atLeast(join(path, "max_connections"), int64(s.MaxConnections), 1)
	c.atLeast(join(path, "max_sessions_per_identity"), int64(s.MaxSessionsPerIdentity), 1)
	c.atLeast(join(path, "max_connections_per_identity"), int64(s.MaxConnectionsPerIdentity), 1)
	buf := join(path, "max_conn_buffer_bytes")
	limit := Size(defaultMaxFrame)
	if s.MaxFrame > 0 {
		limit = s.MaxFrame
	}
	if c.has(buf) && s.MaxConnBuffer < 2*limit {
		c.fail(buf, reasonf(nil, "must be at least twice max_frame (%s), so that a connection can hold two whole frames; got %s", 2*limit, s.MaxConnBuffer))
	}
	for _, b := range []struct {
		key string
		v   Size
	}{{"max_subscription_held_bytes", s.MaxSubscriptionHeld}, {"max_held_bytes", s.MaxHeld}} {
		if p := join(path, b.key); c.has(p) && b.v <= 0 {
			c.fail(p, reasonf(nil, "must be more than 0, got %s (leave it out for the default)", b.v))
		}
	}
}

func (s *LinkSection) linkConfig() petrel.LinkConfig {
	return petrel.LinkConfig{
		Window:           s.Window,
		WindowBytes:      int64(s.WindowBytes),
		MaxFrame:         int(s.MaxFrame),
		HandshakeTimeout: time.Duration(s.HandshakeTimeout),
		WriteTimeout:     time.Duration(s.WriteTimeout),
		IdleTimeout:      time.Duration(s.IdleTimeout),
		ReconnectMin:     time.Duration(s.ReconnectMin),
		ReconnectMax:     time.Duration(s.ReconnectMax),
		StallAfter:       time.Duration(s.StallAfter),
		MaxHandshakes:    s.MaxHandshakes, MaxHandshakesPerIP: s.MaxHandshakesPerIP,
		MaxConnections: s.MaxConnections, MaxConnBuffer: int64(s.MaxConnBuffer),
		MaxSubscriptionHeld: int64(s.MaxSubscriptionHeld), MaxHeld: int64(s.MaxHeld),
		MaxSessionsPerIdentity: s.MaxSessionsPerIdentity, MaxConnectionsPerIdentity: s.MaxConnectionsPerIdentity,
	}
}
