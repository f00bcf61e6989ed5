package conf

import petrel "github.com/petrelmq/petrel"

// TLSSection secures links with TLS (petrel.TLSConfig). The files are read
// when the node opens, not by Parse; a change needs a restart.
type TLSSection struct {
	// Cert and Key are the PEM files of this node's certificate and
	// private key: the listener's certificate, and the client certificate
	// when dialing tls://. Set both or neither; with both, the listener
	// speaks only TLS.
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
	// CA is the PEM bundle of the authorities that sign peers'
	// certificates. Default: the system's roots (for servers only).
	CA string `yaml:"ca"`
	// ClientAuth is none, request or require_and_verify. Default none.
	ClientAuth string `yaml:"client_auth"`
	// ServerName overrides the host of tls:// connectors as the name the
	// servers' certificates must carry.
	ServerName string `yaml:"server_name"`
}

func (s *TLSSection) check(c *checker, path string) {
	const leave = "leave it out to have none"
	c.nonEmpty(join(path, "cert"), s.Cert, leave)
	c.nonEmpty(join(path, "key"), s.Key, leave)
	c.nonEmpty(join(path, "ca"), s.CA, "leave it out for the system's roots")
	c.nonEmpty(join(path, "server_name"), s.ServerName, "leave it out for the host of each connector")
	key := join(path, "client_auth")
	if c.has(key) && (s.ClientAuth == "" || !petrel.ClientAuth(s.ClientAuth).Valid()) {
		c.fail(key, reasonf(nil, "unknown client_auth %s (want none, request or require_and_verify)", short(s.ClientAuth)))
	}
}

func (s *TLSSection) tlsConfig() petrel.TLSConfig {
	return petrel.TLSConfig{
		Cert:       s.Cert,
		Key:        s.Key,
		CA:         s.CA,
		ClientAuth: petrel.ClientAuth(s.ClientAuth),
		ServerName: s.ServerName,
	}
}
