package conf

import (
	"fmt"
	"path/filepath"
	"strings"

	petrel "github.com/petrelmq/petrel"
)

// AdminSection configures the admin HTTP endpoint (petrel.AdminConfig):
// /healthz, /readyz, /metrics, /api/status and the admin API that `petrel
// send`, `recv`, `queues`, `purge`, `dlq` and `sendfile` call.
type AdminSection struct {
	// Listen is the host:port the endpoint serves on. Default: none, no
	// admin listener. Anything but a loopback address needs token_file.
	Listen string `yaml:"listen"`
	// TokenFile is the path of a file holding the bearer token that every
	// request must carry (Authorization: Bearer <token>), except /healthz,
	// /readyz and, unless MetricsAuth, /metrics. Parse reads it into
	// Token; the file must be closed to group and others (chmod 600).
	TokenFile string `yaml:"token_file"`
	// Token is the content of TokenFile, after Parse. It is never written
	// in the file itself.
	Token Secret `yaml:"-"`
	// MetricsAuth asks the token of /metrics too. Default false.
	MetricsAuth bool `yaml:"metrics_auth"`
	// Hosts are more names the Host header may carry ("petrel.example.com",
	// or "name:port"), for a listener reached by a name or through a
	// proxy. Its own address, and localhost on loopback, are always
	// allowed.
	Hosts []string `yaml:"hosts"`
	// FileRoots are the directories whose files POST /api/files (petrel
	// sendfile --server) may send over TCP. Default: none, so that it
	// sends none; the unix socket sends any file the node's user can read.
	FileRoots []string `yaml:"file_roots"`
}

func (s *AdminSection) check(c *checker, path string) {
	key := join(path, "listen")
	if c.has(key) {
		if err := checkListen(s.Listen); err != nil {
			c.fail(key, err)
		}
	}
	c.nonEmpty(join(path, "token_file"), s.TokenFile, "leave it out for no token")
	for i, h := range s.Hosts {
		if h == "" || strings.ContainsAny(h, "/ \t@") {
			c.fail(fmt.Sprintf("%s[%d]", join(path, "hosts"), i),
				reasonf(nil, "%s is not a host name or host:port (write petrel.example.com, not a URL)", short(h)))
		}
	}
	for i, root := range s.FileRoots {
		if !filepath.IsAbs(root) {
			c.fail(fmt.Sprintf("%s[%d]", join(path, "file_roots"), i),
				reasonf(nil, "%s is not an absolute path", short(root)))
		}
	}
}

// readToken fills Token from TokenFile, like readSecret; path is the
// section's key.
func (s *AdminSection) readToken(c *checker, path string) {
	if s.TokenFile == "" {
		return
	}
	if token, ok := readSecretValue(c, join(path, "token_file"), s.TokenFile, "the token"); ok {
		s.Token = Secret(token)
	}
}

func (s *AdminSection) adminConfig() petrel.AdminConfig {
	return petrel.AdminConfig{
		Listen:      s.Listen,
		Token:       string(s.Token),
		MetricsAuth: s.MetricsAuth,
		Hosts:       s.Hosts,
		FileRoots:   s.FileRoots,
	}
}
