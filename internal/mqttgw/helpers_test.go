package mqttgw_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	petrel "github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/petreltest"
)

// testNode is an embedded node with a real MQTT listener on loopback,
// reopened on the same data directory by restart.
type testNode struct {
	t   testing.TB
	cfg petrel.Config
	*petrel.Node
}

func baseConfig(t testing.TB) petrel.Config {
	return petrel.Config{
		Name:    "m1",
		DataDir: t.TempDir(),
		Topics:  []petrel.TopicConfig{{Pattern: "sensors.#"}, {Pattern: "t.#"}},
		MQTT:    petrel.MQTTConfig{Listen: "127.0.0.1:0"},
		Logger:  testLogger(),
	}
}

func openNode(t testing.TB, cfg petrel.Config) *testNode {
	t.Helper()
	tn := &testNode{t: t, cfg: cfg}
	tn.open()
	t.Cleanup(func() { tn.Close() })
	return tn
}

func (tn *testNode) open() {
	tn.t.Helper()
	n, err := petrel.Open(context.Background(), tn.cfg)
	if err != nil {
		tn.t.Fatal(err)
	}
	tn.Node = n
	// The next open takes the same port, so that clients find it again.
	tn.cfg.MQTT.Listen = n.MQTTAddr()
}

// restart closes the node and opens it again on its data directory.
// durable makes the durable subscription name to pattern with no consumer
// attached: it keeps what is published, and depth counts it.
func (tn *testNode) durable(pattern, name string) {
	tn.t.Helper()
	pc, err := tn.Subscribe(context.Background(), pattern, petrel.SubscribeOptions{Name: name, Durable: true})
	if err != nil {
		tn.t.Fatal(err)
	}
	pc.Close()
}

// consumer joins the durable subscription name to pattern, closed when
// the test ends.
func (tn *testNode) consumer(pattern, name string) *petrel.Consumer {
	tn.t.Helper()
	pc, err := tn.Subscribe(context.Background(), pattern, petrel.SubscribeOptions{Name: name, Durable: true})
	if err != nil {
		tn.t.Fatal(err)
	}
	tn.t.Cleanup(func() { pc.Close() })
	return pc
}

// nextDelivery is pc's next delivery, within petreltest.Patience.
func nextDelivery(t testing.TB, pc *petrel.Consumer) *petrel.Delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), petreltest.Patience)
	defer cancel()
	d, err := pc.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func (tn *testNode) restart() {
	tn.t.Helper()
	if err := tn.Close(); err != nil {
		tn.t.Fatal(err)
	}
	tn.open()
}

func (tn *testNode) port() string {
	_, p, _ := net.SplitHostPort(tn.MQTTAddr())
	return p
}

// subscribed waits until the node has n subscriptions.
func (tn *testNode) subscribed(n int) {
	tn.t.Helper()
	petreltest.Eventually(tn.t, "subscriptions", func() bool { return len(tn.Subscriptions()) == n })
}

// depth is the messages a subscription's queue holds.
func (tn *testNode) depth(name string) int64 {
	for _, s := range tn.Subscriptions() {
		if s.Name == name {
			return s.Depth
		}
	}
	return -1
}

// mosquitto runs a mosquitto client to its end and returns its output.
func mosquitto(t testing.TB, tool string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, tool, args...).CombinedOutput()
	return string(out), err
}

// bgSub is a mosquitto_sub running in the background.
type bgSub struct {
	cmd  *exec.Cmd
	out  *petreltest.SyncBuffer
	done chan struct{} // closed when it exited, err set
	err  error
}

func startSub(t testing.TB, args ...string) *bgSub {
	t.Helper()
	if _, err := exec.LookPath("mosquitto_sub"); err != nil {
		t.Skip("mosquitto_sub not installed (apt-get install mosquitto-clients)")
	}
	s := &bgSub{out: &petreltest.SyncBuffer{}, done: make(chan struct{})}
	s.cmd = exec.Command("mosquitto_sub", args...)
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		s.err = s.cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() { s.kill() })
	return s
}

func (s *bgSub) kill() {
	select {
	case <-s.done:
	default:
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// wait returns the output once the client exits.
func (s *bgSub) wait(t testing.TB) string {
	t.Helper()
	select {
	case <-s.done:
		if s.err != nil {
			t.Fatalf("mosquitto_sub: %v\n%s", s.err, s.out.String())
		}
	case <-time.After(petreltest.Patience):
		t.Fatalf("mosquitto_sub did not end\n%s", s.out.String())
	}
	return s.out.String()
}

func lines(s string) []string {
	return strings.Split(strings.TrimSpace(s), "\n")
}

// pahoClient connects an MQTT 5 client.
func pahoClient(t testing.TB, tn *testNode, cp *paho.Connect, cfg paho.ClientConfig) (*paho.Client, *paho.Connack) {
	t.Helper()
	conn, err := net.Dial("tcp", tn.MQTTAddr())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Conn = conn
	c := paho.NewClient(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ca, err := c.Connect(ctx, cp)
	if err != nil {
		t.Fatalf("connect: %v (%+v)", err, ca)
	}
	t.Cleanup(func() {
		_ = c.Disconnect(&paho.Disconnect{})
		<-c.Done()
	})
	return c, ca
}

// subscribeCodes subscribes c to filters at QoS 1 in one SUBSCRIBE, and
// returns the SUBACK's reason code for each.
func subscribeCodes(t testing.TB, c *paho.Client, filters ...string) []byte {
	t.Helper()
	var opts []paho.SubscribeOptions
	for _, f := range filters {
		opts = append(opts, paho.SubscribeOptions{Topic: f, QoS: 1})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sa, err := c.Subscribe(ctx, &paho.Subscribe{Subscriptions: opts})
	if sa == nil || len(sa.Reasons) != len(filters) {
		t.Fatalf("subscribe %v: %+v %v, no SUBACK with a code per filter", filters, sa, err)
	}
	return sa.Reasons
}

// received collects what a paho client receives.
type received struct {
	ch chan *paho.Publish
}

func newReceived() *received { return &received{ch: make(chan *paho.Publish, 1000)} }

func (r *received) handler(p paho.PublishReceived) (bool, error) {
	r.ch <- p.Packet
	return true, nil
}

func (r *received) next(t testing.TB) *paho.Publish {
	t.Helper()
	select {
	case p := <-r.ch:
		return p
	case <-time.After(petreltest.Patience):
		t.Fatal("no publish received")
		return nil
	}
}

// none checks that nothing more arrives within a short while.
func (r *received) none(t testing.TB, d time.Duration) {
	t.Helper()
	select {
	case p := <-r.ch:
		t.Fatalf("unexpected publish %q %q", p.Topic, p.Payload)
	case <-time.After(d):
	}
}

// testLogger discards the node's log, unless PETREL_TEST_LOG is set.
func testLogger() *slog.Logger {
	if os.Getenv("PETREL_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func netDial(tn *testNode) (net.Conn, error) { return net.Dial("tcp", tn.MQTTAddr()) }
