package conf

import (
	"time"

	petrel "github.com/petrelmq/petrel"
)

// MQTTSection is the node's MQTT listener (petrel.MQTTConfig). Off
// unless listen is set; a change needs a restart.
type MQTTSection struct {
	// Listen is the host:port MQTT clients connect to ("0.0.0.0:1883").
	Listen string `yaml:"listen"`
	// TLS makes the MQTT listeners speak TLS with the certificate of the
	// tls section (and its client_auth).
	TLS bool `yaml:"tls"`
	// WebSocket is the host:port of an MQTT over WebSocket listener.
	WebSocket string `yaml:"websocket"`
	// MaxInflight bounds the QoS 1 and 2 deliveries awaiting each
	// client's acknowledgement (default 100).
	MaxInflight int `yaml:"max_inflight"`
	// MaxClients bounds the clients connected at once (default 1024).
	MaxClients int `yaml:"max_clients"`
	// MaxRetained bounds the topics holding a retained message (default
	// 10000).
	MaxRetained int `yaml:"max_retained"`
	// MaxRetainedBytes bounds the bytes of the retained messages (default
	// 64MiB).
	MaxRetainedBytes Size `yaml:"max_retained_bytes"`
	// MaxSessions bounds the persistent sessions kept (default 10000).
	MaxSessions int `yaml:"max_sessions"`
	// MaxSubscriptions bounds the topic filters one client holds
	// (default 100).
	MaxSubscriptions int `yaml:"max_subscriptions"`
	// MaxSessionExpiry caps the time a persistent session outlives its
	// connection (default 7 days).
	MaxSessionExpiry Duration `yaml:"max_session_expiry"`
	// SysInterval is how often the $SYS topics are published (default
	// 10s).
	SysInterval Duration `yaml:"sys_interval"`
}

func (s *MQTTSection) check(c *checker, path string) {
	for _, k := range []struct{ key, v string }{{"listen", s.Listen}, {"websocket", s.WebSocket}} {
		key := join(path, k.key)
		if c.has(key) {
			if err := checkListen(k.v); err != nil {
				c.fail(key, err)
			}
		}
	}
	if key := join(path, "max_inflight"); c.has(key) {
		c.atLeast(key, int64(s.MaxInflight), 1)
	}
	if key := join(path, "max_clients"); c.has(key) {
		c.atLeast(key, int64(s.MaxClients), 1)
	}
	if key := join(path, "max_retained"); c.has(key) {
		c.atLeast(key, int64(s.MaxRetained), 1)
	}
	if key := join(path, "max_retained_bytes"); c.has(key) && s.MaxRetainedBytes <= 0 {
		c.fail(key, reasonf(nil, "must be more than 0, got %s (leave it out for the default)", s.MaxRetainedBytes))
	}
	if key := join(path, "max_sessions"); c.has(key) {
		c.atLeast(key, int64(s.MaxSessions), 1)
	}
	if key := join(path, "max_subscriptions"); c.has(key) {
		c.atLeast(key, int64(s.MaxSubscriptions), 1)
	}
	c.positive(join(path, "max_session_expiry"), s.MaxSessionExpiry)
	c.positive(join(path, "sys_interval"), s.SysInterval)
}

func (s *MQTTSection) mqttConfig() petrel.MQTTConfig {
	return petrel.MQTTConfig{Listen: s.Listen, TLS: s.TLS, WebSocket: s.WebSocket, MaxInflight: s.MaxInflight, MaxClients: s.MaxClients, MaxRetained: s.MaxRetained, MaxRetainedBytes: int64(s.MaxRetainedBytes), MaxSessions: s.MaxSessions,
		MaxSubscriptions: s.MaxSubscriptions, MaxSessionExpiry: time.Duration(s.MaxSessionExpiry),
		SysInterval: time.Duration(s.SysInterval)}
}
