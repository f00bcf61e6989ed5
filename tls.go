package petrel

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
)

// TLSConfig secures links with TLS: the listener then speaks only TLS, and
// tls:// connectors dial with this node's certificate and trust. The
// shared-secret handshake, when a secret is set, still runs inside TLS.
//
// Paths are read once, when the node opens; a change needs a restart.
type TLSConfig struct {
	// Cert and Key are the PEM files of this node's certificate (its chain
	// may follow it in the file) and private key. When both are set the
	// listener accepts only TLS connections, with this certificate; when
	// dialing tls:// it is the client certificate that mutual TLS asks for.
	// Set both or neither.
	Cert, Key string
	// CA is a PEM bundle of the certificate authorities trusted to sign
	// peers' certificates: the servers this node dials over tls://, and,
	// with ClientAuth require_and_verify, the clients of its listener.
	// Empty: the system's roots verify servers, and ClientAuth cannot be
	// require_and_verify.
	CA string
	// ClientAuth is what the listener asks of clients: none (the default),
	// request (a certificate is asked for but not verified, so it proves
	// nothing), or require_and_verify (mutual TLS: a client without a
	// certificate signed by CA is refused at the TLS handshake).
	ClientAuth ClientAuth
	// ServerName, when set, is the name the certificates of servers dialed
	// over tls:// must carry, instead of the host of the connector. A
	// connector's own server_name option (tls://10.0.0.9:7400?server_name=hub-1)
	// wins over it.
	ServerName string
}

// ClientAuth is what a TLS listener asks of its clients; see
// TLSConfig.ClientAuth.
type ClientAuth string

// The values of TLSConfig.ClientAuth. The zero value means ClientAuthNone.
const (
	ClientAuthNone             ClientAuth = "none"
	ClientAuthRequest          ClientAuth = "request"
	ClientAuthRequireAndVerify ClientAuth = "require_and_verify"
)

// Valid reports whether a is one of the ClientAuth values, or empty.
func (a ClientAuth) Valid() bool {
	switch a {
	case "", ClientAuthNone, ClientAuthRequest, ClientAuthRequireAndVerify:
		return true
	}
	return false
}

// Listening reports whether the listener speaks TLS: Cert and Key are set.
func (c TLSConfig) Listening() bool { return c.Cert != "" && c.Key != "" }

// validate checks the settings without reading the files; Open reads them.
func (c TLSConfig) validate() error {
	switch {
	case c.Cert != "" && c.Key == "":
		return cfgErr("tls.key", "tls.cert is set but tls.key is not: set both, or neither", nil)
	case c.Key != "" && c.Cert == "":
		return cfgErr("tls.cert", "tls.key is set but tls.cert is not: set both, or neither", nil)
	case !c.ClientAuth.Valid():
		return cfgErr("tls.client_auth", fmt.Sprintf("unknown value %q (want none, request or require_and_verify)", string(c.ClientAuth)), nil)
	case c.ClientAuth != "" && c.ClientAuth != ClientAuthNone && !c.Listening():
		return cfgErr("tls.client_auth", fmt.Sprintf("%s asks the listener's clients for certificates, but the listener has none: set tls.cert and tls.key", c.ClientAuth), nil)
	case c.ClientAuth == ClientAuthRequireAndVerify && c.CA == "":
		return cfgErr("tls.ca", "client_auth require_and_verify verifies clients against tls.ca: set it to the bundle of the authorities that sign your nodes' certificates", nil)
	}
	return nil
}

// ServerConfig reads the files and returns the listener's TLS
// configuration, or nil when Cert and Key are not set (the listener is
// then plain TCP). A problem is a *ConfigError naming the key and the file,
// as in "tls.cert: open /etc/petrel/node.pem: no such file or directory".
func (c TLSConfig) ServerConfig() (*tls.Config, error) {
	f, err := c.load()
	if err != nil {
		return nil, err
	}
	return f.server(c), nil
}

// ClientConfig reads the files and returns the TLS configuration for
// dialing a tls:// connector: CA (or the system's roots) verifies the
// server, and Cert and Key, when set, are the client certificate.
//
// ServerName is c.ServerName. When it is empty, the caller must set it to
// the host it dials (a tls.Dialer does so by itself), so that the server's
// certificate is checked against the name that was meant. Errors are as
// ServerConfig's.
func (c TLSConfig) ClientConfig() (*tls.Config, error) {
	f, err := c.load()
	if err != nil {
		return nil, err
	}
	return f.client(c), nil
}

// tlsFiles is what the files of a TLSConfig hold.
type tlsFiles struct {
	cert *tls.Certificate // nil without Cert and Key
	pool *x509.CertPool   // nil without CA
}

// load checks c and reads its files.
func (c TLSConfig) load() (tlsFiles, error) {
	var f tlsFiles
	if err := c.validate(); err != nil {
		return f, err
	}
	if c.Listening() {
		cert, err := c.keyPair()
		if err != nil {
			return f, err
		}
		f.cert = &cert
	}
	if c.CA != "" {
		pool, err := c.readPool()
		if err != nil {
			return f, err
		}
		f.pool = pool
	}
	return f, nil
}

// server is the listener's configuration; nil without a certificate.
func (f tlsFiles) server(c TLSConfig) *tls.Config {
	if f.cert == nil {
		return nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*f.cert}}
	switch c.ClientAuth {
	case ClientAuthRequest:
		cfg.ClientAuth = tls.RequestClientCert
	case ClientAuthRequireAndVerify:
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
		cfg.ClientCAs = f.pool // validate made sure CA is set
	}
	return cfg
}

// client is the dialer's configuration.
//
// The certificate is offered whatever authorities the server's request
// names (GetClientCertificate, which takes precedence over Certificates):
// Go's client withholds one that chains to none of them, and the server
// would then report that no certificate came ("certificate required"),
// hiding the true cause, an authority it does not trust, which it names
// once it sees the certificate. Certificates still holds it, for whoever
// reads the configuration.
func (f tlsFiles) client(c TLSConfig) *tls.Config {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.ServerName, RootCAs: f.pool}
	if f.cert != nil {
		cert := f.cert
		cfg.Certificates = []tls.Certificate{*cert}
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
	}
	return cfg
}

// keyPair reads Cert and Key, and says which of the two is wrong.
func (c TLSConfig) keyPair() (tls.Certificate, error) {
	certPEM, err := readPEM("tls.cert", c.Cert, "CERTIFICATE")
	if err != nil {
		return tls.Certificate{}, err
	}
	keyPEM, err := readPEM("tls.key", c.Key, "PRIVATE KEY")
	if err != nil {
		return tls.Certificate{}, err
	}
	if err := checkSecretMode("tls.key", c.Key); err != nil {
		return tls.Certificate{}, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, cfgErr("tls.key", fmt.Sprintf("%s with %s: %v", c.Key, c.Cert, err), err)
	}
	return cert, nil
}

// readPool reads CA into a certificate pool.
func (c TLSConfig) readPool() (*x509.CertPool, error) {
	data, err := readPEM("tls.ca", c.CA, "CERTIFICATE")
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, cfgErr("tls.ca", fmt.Sprintf("%s: no certificate in it could be parsed", c.CA), nil)
	}
	return pool, nil
}

// readPEM reads the file at path, which must hold at least one PEM block
// whose type ends in want ("PRIVATE KEY" takes "EC PRIVATE KEY" too).
func readPEM(field, path, want string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, cfgErr(field, err.Error(), err)
	}
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			return nil, cfgErr(field, fmt.Sprintf("%s: no PEM %s block in it", path, want), nil)
		}
		if strings.HasSuffix(b.Type, want) {
			return data, nil
		}
	}
}

// ErrSecretReadable is returned, in a *ConfigError, when a file that
// holds a secret (a TLS private key; in conf, secret_file and
// admin.token_file too) can be read by its group or by others.
var ErrSecretReadable = errors.New("secret file readable by other users")

// checkSecretMode refuses the secret file at path, the value of field,
// if its group or others may read or write it. The check follows links,
// since what matters is the file the key is read from. Windows has no
// such modes: there it passes.
func checkSecretMode(field, path string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return cfgErr(field, err.Error(), err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return cfgErr(field, fmt.Sprintf("%s has mode %04o: users other than its owner may read or change it; run chmod 600 %s", path, perm, path), ErrSecretReadable)
	}
	return nil
}

// nodeTLS is the node's TLS, read once at Open. fx builds it before the
// store, so that a missing or bad file stops Open before anything is
// opened.
type nodeTLS struct {
	server *tls.Config // nil: the listener is plain TCP
	client *tls.Config // for tls:// connectors; never nil
}

func loadTLS(cfg Config) (nodeTLS, error) {
	f, err := cfg.TLS.load()
	if err != nil {
		return nodeTLS{}, err
	}
	return nodeTLS{server: f.server(cfg.TLS), client: f.client(cfg.TLS)}, nil
}
