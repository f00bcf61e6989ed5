package conf

import (
	"path/filepath"

	petrel "github.com/petrelmq/petrel"
)

// HASection makes the node one of a live/backup pair on a shared data
// directory (petrel.HAConfig).
type HASection struct {
	// Role is live or backup.
	Role string `yaml:"role"`
	// Lock is the lock file's name in the data directory. Default ha.lock.
	Lock string `yaml:"lock"`
}

func (s *HASection) check(c *checker, path string) {
	if c.has(join(path, "role")) && s.Role != string(petrel.HARoleLive) && s.Role != string(petrel.HARoleBackup) {
		c.fail(join(path, "role"), reasonf(nil, "%s: want live or backup", short(s.Role)))
	}
	if c.has(join(path, "lock")) && (s.Lock == "" || s.Lock != filepath.Base(s.Lock) || s.Lock == "." || s.Lock == "..") {
		c.fail(join(path, "lock"), reasonf(nil, "%s: want a plain file name in the data directory", short(s.Lock)))
	}
	if c.has(path) && !c.has(join(path, "role")) {
		c.fail(path, reasonf(nil, "ha needs a role: live or backup"))
	}
}

func (s *HASection) haConfig() petrel.HAConfig {
	return petrel.HAConfig{Role: petrel.HARole(s.Role), Lock: s.Lock}
}
