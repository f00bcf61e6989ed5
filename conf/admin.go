package conf

import petrel "github.com/petrelmq/petrel"

// AdminSection configures the admin HTTP endpoint (petrel.AdminConfig):
// /healthz, /readyz, /metrics and /api/status.
type AdminSection struct {
	// Listen is the host:port the endpoint serves on. Default: none, no
	// admin listener. It has no authentication: bind it to loopback unless
	// you mean to expose it.
	Listen string `yaml:"listen"`
}

func (s *AdminSection) check(c *checker, path string) {
	key := join(path, "listen")
	if c.has(key) {
		if err := checkListen(s.Listen); err != nil {
			c.fail(key, err)
		}
	}
}

func (s *AdminSection) adminConfig() petrel.AdminConfig {
	return petrel.AdminConfig{Listen: s.Listen}
}
