package mqttgw_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	petrel "github.com/petrelmq/petrel"
)

// testCA is a throwaway certificate authority in a test's directory.
type testCA struct {
	dir  string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	path string
}

func newCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &testCA{dir: t.TempDir(), cert: cert, key: key}
	ca.path = writePEM(t, ca.dir, "ca.pem", "CERTIFICATE", der)
	return ca
}

// issue makes a server and client certificate for cn, valid for
// 127.0.0.1, and returns the paths of it and its key.
func (ca *testCA) issue(t *testing.T, cn string) (cert, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &k.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalPKCS8PrivateKey(k)
	return writePEM(t, ca.dir, cn+".pem", "CERTIFICATE", der), writePEM(t, ca.dir, cn+".key", "PRIVATE KEY", kder)
}

func writePEM(t *testing.T, dir, name, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Under mutual TLS a mosquitto client's certificate is its identity: the
// access rules judge it by its Common Name, and a client without a
// certificate does not get through the handshake.
func TestMosquittoTLSClientCertificate(t *testing.T) {
	needMosquitto(t)
	ca := newCA(t)
	cfg := baseConfig(t)
	cert, key := ca.issue(t, "m1")
	cfg.TLS = petrel.TLSConfig{Cert: cert, Key: key, CA: ca.path, ClientAuth: petrel.ClientAuthRequireAndVerify}
	cfg.MQTT.TLS = true
	cfg.Access = []petrel.AccessRule{{Identity: "dev-1", Publish: []string{"sensors.dev-1.#"}}}
	tn := openNode(t, cfg)
	ctx := context.Background()
	pc, err := tn.Subscribe(ctx, "sensors.#", petrel.SubscribeOptions{Name: "all", Durable: true})
	if err != nil {
		t.Fatal(err)
	}
	pc.Close()
	dc, dk := ca.issue(t, "dev-1")
	tlsArgs := []string{"--cafile", ca.path, "--cert", dc, "--key", dk, "-h", "127.0.0.1"}
	pub(t, tn, append(tlsArgs, "-t", "sensors/dev-1/temp", "-q", "1", "-m", "21")...)
	out, err := mosquitto(t, "mosquitto_pub", append(append([]string{"-p", tn.port()}, tlsArgs...), "-V", "mqttv5", "-t", "sensors/dev-2/temp", "-q", "1", "-m", "x")...)
	if err != nil && out == "" {
		t.Fatalf("publish as dev-1 to dev-2's topic: %v", err)
	}
	if _, err := mosquitto(t, "mosquitto_pub", "-p", tn.port(), "--cafile", ca.path, "-h", "127.0.0.1", "-t", "sensors/dev-1/temp", "-q", "1", "-m", "y"); err == nil {
		t.Fatal("a client without a certificate published")
	}
	if err := tn.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if d := tn.depth("all"); d != 1 {
		t.Fatalf("stored %d, want only dev-1's own publish", d)
	}
	if st := tn.Status().MQTT; st.Refused != 1 || st.List != nil && len(st.List) != 0 {
		t.Fatalf("stats %+v", st)
	}
}
