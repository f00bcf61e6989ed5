package petrel_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
	"github.com/petrelmq/petrel/session"
)

// testCA is petreltest's CA, with the TLS of a node it certifies.
type testCA struct{ *petreltest.CA }

func newCA(t *testing.T, name string) *testCA { return &testCA{petreltest.NewCA(t, name)} }

// nodeTLS is the TLS of a node named name with a certificate from ca, that
// trusts trust.
func (ca *testCA) nodeTLS(t *testing.T, name string, trust *testCA, auth petrel.ClientAuth) petrel.TLSConfig {
	cert, key := ca.Issue(t, name)
	return petrel.TLSConfig{Cert: cert, Key: key, CA: trust.Path, ClientAuth: auth}
}

func tlsURL(n *petrel.Node) string { return "tls://" + n.ListenAddr() }

// sendOne queues one message for addr with body.
func sendOne(t *testing.T, n *petrel.Node, addr, body string) {
	t.Helper()
	p := n.Producer()
	m := p.CreateDataMessage(addr)
	m.Body = []byte(body)
	if err := p.Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
}

func TestTLSLinkCarriesMessages(t *testing.T) {
	ca := newCA(t, "ca")
	b := nodes.Open(t, nodes.Name("b"), nodes.Listen("127.0.0.1:0"), nodes.With(func(c *petrel.Config) {
		c.TLS = ca.nodeTLS(t, "b", ca, petrel.ClientAuthRequireAndVerify)
		c.Secret = "both"
	}))
	a := nodes.Open(t, nodes.Name("a"), nodes.With(func(c *petrel.Config) {
		c.TLS = ca.nodeTLS(t, "a", ca, "")
		c.Secret = "both"
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: tlsURL(b)}}
	}))
	const total = 200
	for i := range total {
		sendOne(t, a, "orders@b", fmt.Sprint(i))
	}
	drainBodies(t, b, "orders", numbered(total), a)
	petreltest.Eventually(t, fmt.Sprintf("the TLS link connected with all %d acked", total), func() bool {
		l := a.Links()
		return len(l) == 1 && l[0].Acked == total && l[0].State == "connected"
	}, func() string { return fmt.Sprintf("links %+v", a.Links()) })
	if st := b.ReceiverStats(); st.HandshakeFailed != 0 {
		t.Fatalf("handshakes failed on a good link: %+v", st)
	}
}

func TestMutualTLSRefusesUntrustedClients(t *testing.T) {
	ca, other := newCA(t, "ca"), newCA(t, "other")
	b := nodes.Open(t, nodes.Name("b"), nodes.Listen("127.0.0.1:0"), nodes.With(func(c *petrel.Config) {
		c.TLS = ca.nodeTLS(t, "b", ca, petrel.ClientAuthRequireAndVerify)
	}))
	clients := []struct {
		name string
		tls  petrel.TLSConfig
		want string // in the link's last error
	}{
		// Trusts b, but has no certificate of its own.
		{"nocert", petrel.TLSConfig{CA: ca.Path}, "certificate required"},
		// A certificate from an authority b does not trust: offered all
		// the same, it is refused for its authority.
		{"othercert", other.nodeTLS(t, "othercert", ca, ""), "unknown certificate authority"},
		// A good certificate, for another name than the one it claims.
		{"impostor", func() petrel.TLSConfig {
			cert, key := ca.Issue(t, "someone-else")
			return petrel.TLSConfig{Cert: cert, Key: key, CA: ca.Path}
		}(), `presented a certificate for "someone-else"`},
	}
	for i, cl := range clients {
		t.Run(cl.name, func(t *testing.T) {
			before := b.ReceiverStats()
			a := nodes.Open(t, nodes.Name(cl.name), nodes.With(func(c *petrel.Config) {
				c.TLS = cl.tls
				c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: tlsURL(b)}}
			}))
			sendOne(t, a, "orders@b", "refused")
			petreltest.Eventually(t, "the refused handshake seen on both sides", func() bool {
				l := a.Links()
				return b.ReceiverStats().HandshakeFailed > before.HandshakeFailed &&
					len(l) == 1 && strings.Contains(l[0].LastError, cl.want)
			}, func() string { return fmt.Sprintf("b %+v\nlinks %+v", b.ReceiverStats(), a.Links()) })
			st := b.ReceiverStats()
			if i < 2 && st.TLSFailed == before.TLSFailed {
				t.Errorf("TLS failure not counted: %+v", st)
			}
			if i == 2 && st.AuthFailed == before.AuthFailed {
				t.Errorf("name mismatch not counted as an auth failure: %+v", st)
			}
			if l := a.Links(); l[0].Depth != 1 || l[0].State == "connected" {
				t.Errorf("link %+v", l[0])
			}
		})
	}
	// A client that offers its certificate anyway is refused for it.
	cert, key := other.Issue(t, "pushy")
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	before := b.ReceiverStats()
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	nc, err := tls.Dial("tcp", b.ListenAddr(), &tls.Config{RootCAs: pool,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }})
	if err == nil { // TLS 1.3: the server's verdict comes with the first read
		_, err = nc.Read(make([]byte, 1))
		nc.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "unknown certificate authority") {
		t.Fatalf("client with another CA's certificate: %v", err)
	}
	petreltest.Eventually(t, "b counting the TLS failure", func() bool { return b.ReceiverStats().TLSFailed > before.TLSFailed }, func() string { return fmt.Sprintf("%+v", b.ReceiverStats()) })
	if qs := b.QueueStats(); len(qs) != 0 {
		t.Fatalf("a queue was touched by an untrusted client: %+v", qs)
	}
}

// TestMutualTLSNamesUntrustedAuthority: a node whose certificate an
// authority the listener does not trust signed is told so, and the
// listener's log names the certificate and its issuer, rather than both
// saying that no certificate came.
func TestMutualTLSNamesUntrustedAuthority(t *testing.T) {
	ca, other := newCA(t, "ca"), newCA(t, "other")
	var logs petreltest.SyncBuffer
	b := nodes.Open(t, nodes.Name("b"), nodes.Listen("127.0.0.1:0"), nodes.With(func(c *petrel.Config) {
		c.TLS = ca.nodeTLS(t, "b", ca, petrel.ClientAuthRequireAndVerify)
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	}))
	a := nodes.Open(t, nodes.Name("plant"), nodes.With(func(c *petrel.Config) {
		c.TLS = other.nodeTLS(t, "plant", ca, "")
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: tlsURL(b)}}
	}))
	sendOne(t, a, "orders@b", "refused")
	petreltest.Eventually(t, "the dialer told of the unknown authority", func() bool {
		l := a.Links()
		return len(l) == 1 && strings.Contains(l[0].LastError, "unknown certificate authority")
	}, func() string { return fmt.Sprintf("links %+v", a.Links()) })
	petreltest.Eventually(t, "the listener logging the certificate's issuer", func() bool {
		return strings.Contains(logs.String(), `client certificate \"plant\" is issued by \"other\"`)
	}, logs.String)
	if strings.Contains(logs.String(), "didn't provide a certificate") {
		t.Fatalf("the listener says no certificate came:\n%s", logs.String())
	}
}

func TestTLSDialerRefusesUntrustedServer(t *testing.T) {
	ca, other := newCA(t, "ca"), newCA(t, "other")
	b := nodes.Open(t, nodes.Name("b"), nodes.Listen("127.0.0.1:0"), nodes.With(func(c *petrel.Config) {
		c.TLS = other.nodeTLS(t, "b", other, "")
	}))
	a := nodes.Open(t, nodes.Name("a"), nodes.With(func(c *petrel.Config) {
		c.TLS = petrel.TLSConfig{CA: ca.Path}
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: tlsURL(b)}}
	}))
	sendOne(t, a, "orders@b", "kept")
	petreltest.Eventually(t, "the link backing off on an unknown authority", func() bool {
		l := a.Links()
		return len(l) == 1 && l[0].State == "backing off" && strings.Contains(l[0].LastError, "certificate signed by unknown authority")
	}, func() string { return fmt.Sprintf("links %+v", a.Links()) })
	if l := a.Links(); l[0].Depth != 1 {
		t.Fatalf("message left the send queue: %+v", l)
	}
}

func TestTLSServerNameMustMatch(t *testing.T) {
	ca := newCA(t, "ca")
	b := nodes.Open(t, nodes.Name("b"), nodes.Listen("127.0.0.1:0"), nodes.With(func(c *petrel.Config) {
		c.TLS = ca.nodeTLS(t, "b", ca, "")
	}))
	// The certificate is for 127.0.0.1 and localhost, not hub-1.
	a := nodes.Open(t, nodes.Name("a"), nodes.With(func(c *petrel.Config) {
		c.TLS = petrel.TLSConfig{CA: ca.Path, ServerName: "hub-1.example.com"}
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: tlsURL(b)}}
	}))
	sendOne(t, a, "orders@b", "x")
	petreltest.Eventually(t, "the link failing on the name hub-1.example.com", func() bool {
		l := a.Links()
		return len(l) == 1 && strings.Contains(l[0].LastError, "hub-1.example.com")
	}, func() string { return fmt.Sprintf("links %+v", a.Links()) })
	// The connector's own server_name wins over the node's.
	_, port, _ := net.SplitHostPort(b.ListenAddr())
	c := nodes.Open(t, nodes.Name("c"), nodes.With(func(c *petrel.Config) {
		c.TLS = petrel.TLSConfig{CA: ca.Path, ServerName: "hub-1.example.com"}
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: "tls://127.0.0.1:" + port + "?server_name=localhost"}}
	}))
	sendOne(t, c, "orders@b", "y")
	drainBodies(t, b, "orders", []string{"y"}, c)
}

// TestTLSListenerDropsSilentAndPlainPeers checks that a TLS listener
// accepts nothing but TLS, and that a peer that connects and says nothing
// is dropped after the handshake timeout.
func TestTLSListenerDropsSilentAndPlainPeers(t *testing.T) {
	ca := newCA(t, "ca")
	b := nodes.Open(t, nodes.Name("b"), nodes.Listen("127.0.0.1:0"), nodes.With(func(c *petrel.Config) {
		c.TLS = ca.nodeTLS(t, "b", ca, "")
		c.Link.HandshakeTimeout = 300 * time.Millisecond
	}))
	silent, err := net.Dial("tcp", b.ListenAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	silent.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadAll(silent); err != nil {
		t.Fatalf("silent peer was not dropped: %v", err)
	}
	// A plain node: the listener never says Hello, so its handshake times
	// out, with a hint.
	a := nodes.Open(t, nodes.Name("a"), nodes.With(func(c *petrel.Config) {
		c.Link.HandshakeTimeout = 300 * time.Millisecond
		c.Nodes = []petrel.NodeConfig{{Name: "b", Connector: nodes.TCP(b)}}
	}))
	sendOne(t, a, "orders@b", "plain")
	petreltest.Eventually(t, "the link failing with a hint to use tls://", func() bool {
		l := a.Links()
		return len(l) == 1 && strings.Contains(l[0].LastError, "tls://")
	}, func() string { return fmt.Sprintf("links %+v", a.Links()) })
	// The plain peer can see its own timeout before b counts the failure.
	petreltest.Eventually(t, "b counting both TLS failures", func() bool { return b.ReceiverStats().TLSFailed >= 2 },
		func() string { return fmt.Sprintf("%+v", b.ReceiverStats()) })
	if len(b.QueueStats()) != 0 {
		t.Fatalf("queues %+v", b.QueueStats())
	}
}

func TestTLSFilesAreCheckedAtOpen(t *testing.T) {
	ca := newCA(t, "ca")
	cert, key := ca.Issue(t, "n")
	_, otherKey := ca.Issue(t, "m")
	missing := filepath.Join(t.TempDir(), "missing.pem")
	notPEM := filepath.Join(t.TempDir(), "junk.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		tls  petrel.TLSConfig
		want string
	}{
		{"missing cert", petrel.TLSConfig{Cert: missing, Key: key}, "tls.cert: open " + missing + ": no such file"},
		{"missing key", petrel.TLSConfig{Cert: cert, Key: missing}, "tls.key: open " + missing},
		{"cert not PEM", petrel.TLSConfig{Cert: notPEM, Key: key}, "tls.cert: " + notPEM + ": no PEM CERTIFICATE block"},
		{"key of another cert", petrel.TLSConfig{Cert: cert, Key: otherKey}, "tls.key: " + otherKey + " with " + cert},
		{"missing ca", petrel.TLSConfig{CA: missing}, "tls.ca: open " + missing},
		{"ca not PEM", petrel.TLSConfig{CA: notPEM}, "tls.ca: " + notPEM},
		{"cert without key", petrel.TLSConfig{Cert: cert}, "tls.key: tls.cert is set but tls.key is not"},
		{"bad client_auth", petrel.TLSConfig{Cert: cert, Key: key, ClientAuth: "always"}, `tls.client_auth: unknown value "always"`},
		{"verify without ca", petrel.TLSConfig{Cert: cert, Key: key, ClientAuth: petrel.ClientAuthRequireAndVerify}, "tls.ca: client_auth require_and_verify"},
		{"client_auth without cert", petrel.TLSConfig{CA: ca.Path, ClientAuth: petrel.ClientAuthRequest}, "tls.client_auth: request asks"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := petrel.Config{Name: "n", DataDir: t.TempDir(), Logger: quiet, TLS: tt.tls}
			n, err := petrel.Open(context.Background(), cfg)
			if err == nil {
				n.Close()
				t.Fatal("Open succeeded")
			}
			if !errors.Is(err, petrel.ErrConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Open = %v; want ErrConfig and %q", err, tt.want)
			}
		})
	}
}

// TestTLSClientConfigDialsANode checks the helper that remote clients use
// for tls:// URLs: a plain tls.Dialer with it reaches a node and verifies
// it.
func TestTLSClientConfigDialsANode(t *testing.T) {
	ca := newCA(t, "ca")
	b := nodes.Open(t, nodes.Name("b"), nodes.Listen("127.0.0.1:0"), nodes.With(func(c *petrel.Config) {
		c.TLS = ca.nodeTLS(t, "b", ca, petrel.ClientAuthRequireAndVerify)
	}))
	cfg, err := ca.nodeTLS(t, "client-1", ca, "").ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ServerName != "" || cfg.RootCAs == nil || len(cfg.Certificates) != 1 {
		t.Fatalf("ClientConfig = %+v", cfg)
	}
	d := tls.Dialer{Config: cfg}
	nc, err := d.DialContext(context.Background(), "tcp", b.ListenAddr())
	if err != nil {
		t.Fatal(err)
	}
	c, err := session.Client(context.Background(), nc, session.Config{Name: "client-1", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Peer().Name != "b" {
		t.Fatalf("reached %q", c.Peer().Name)
	}
	if _, err := (petrel.TLSConfig{}).ServerConfig(); err != nil {
		t.Fatalf("ServerConfig of no TLS: %v", err)
	}
}
