package mqttgw_test

import (
	"context"
	"testing"

	petrel "github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/petreltest"
)

// mutualTLSNode opens a node whose MQTT listeners require a client
// certificate of ca, whose rules let identity dev-1 publish to
// sensors.dev-1.# only, and which holds the durable subscription "all" to
// sensors.#; mod changes its configuration first.
func mutualTLSNode(t *testing.T, mod func(*petrel.Config)) (*petreltest.CA, *testNode) {
	t.Helper()
	ca := petreltest.NewCA(t, "ca")
	cfg := baseConfig(t)
	cert, key := ca.Issue(t, "m1")
	cfg.TLS = petrel.TLSConfig{Cert: cert, Key: key, CA: ca.Path, ClientAuth: petrel.ClientAuthRequireAndVerify}
	cfg.MQTT.TLS = true
	cfg.Access = []petrel.AccessRule{{Identity: "dev-1", Publish: []string{"sensors.dev-1.#"}}}
	if mod != nil {
		mod(&cfg)
	}
	tn := openNode(t, cfg)
	tn.durable("sensors.#", "all")
	return ca, tn
}

// Under mutual TLS a mosquitto client's certificate is its identity: the
// access rules judge it by its Common Name, and a client without a
// certificate does not get through the handshake.
func TestMosquittoTLSClientCertificate(t *testing.T) {
	needMosquitto(t)
	ca, tn := mutualTLSNode(t, nil)
	ctx := context.Background()
	dc, dk := ca.Issue(t, "dev-1")
	tlsArgs := []string{"--cafile", ca.Path, "--cert", dc, "--key", dk, "-h", "127.0.0.1"}
	pub(t, tn, append(tlsArgs, "-t", "sensors/dev-1/temp", "-q", "1", "-m", "21")...)
	out, err := mosquitto(t, "mosquitto_pub", append(append([]string{"-p", tn.port()}, tlsArgs...), "-V", "mqttv5", "-t", "sensors/dev-2/temp", "-q", "1", "-m", "x")...)
	if err != nil && out == "" {
		t.Fatalf("publish as dev-1 to dev-2's topic: %v", err)
	}
	if _, err := mosquitto(t, "mosquitto_pub", "-p", tn.port(), "--cafile", ca.Path, "-h", "127.0.0.1", "-t", "sensors/dev-1/temp", "-q", "1", "-m", "y"); err == nil {
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
