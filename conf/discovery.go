package conf

import (
	"time"

	petrel "github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/address"
)

// DiscoverySection turns on discovery by UDP announcements
// (petrel.DiscoveryConfig).
type DiscoverySection struct {
	Enabled   bool     `yaml:"enabled"`
	Group     string   `yaml:"group"`
	Interface string   `yaml:"interface"`
	Period    Duration `yaml:"period"`
	Timeout   Duration `yaml:"timeout"`
	Advertise string   `yaml:"advertise"`
	// MaxNodes bounds the nodes kept from announcements. Default 1024.
	MaxNodes int `yaml:"max_nodes"`
}

func (s *DiscoverySection) check(c *checker, path string) {
	c.positive(join(path, "period"), s.Period)
	c.positive(join(path, "timeout"), s.Timeout)
	c.atLeast(join(path, "max_nodes"), int64(s.MaxNodes), 1)
	if s.Period > 0 && s.Timeout > 0 && s.Timeout <= s.Period {
		c.fail(join(path, "timeout"), reasonf(nil, "%s is not longer than period %s: nodes would expire between announcements", s.Timeout, s.Period))
	}
	if c.has(join(path, "group")) {
		err := address.DiscoveryConfig{Group: s.Group, Interface: s.Interface}.Validate()
		if err != nil {
			c.fail(join(path, "group"), reasonf(err, "%v", err))
		}
	}
	if c.has(join(path, "advertise")) {
		if _, err := address.ParseConnectors(s.Advertise); err != nil {
			c.fail(join(path, "advertise"), reasonf(err, "%v", err))
		}
	}
}

func (s *DiscoverySection) discoveryConfig() petrel.DiscoveryConfig {
	return petrel.DiscoveryConfig{
		Enabled: s.Enabled, Group: s.Group, Interface: s.Interface,
		Period: time.Duration(s.Period), Timeout: time.Duration(s.Timeout), Advertise: s.Advertise,
		MaxNodes: s.MaxNodes,
	}
}
