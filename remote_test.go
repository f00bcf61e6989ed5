package petrel_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/address"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/petreltest/nodes"
	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/session"
)

// What only remote clients have: the handshake, access rules, dedupe of
// what they send again, reconnects, TLS and the bounds of their buffers.
// The conformance suite covers what they share with the embedded API.

func TestRemoteSecretCheckedAtDial(t *testing.T) {
	n := nodes.Open(t, nodes.Name("plant-7"), nodes.Listen("127.0.0.1:0"), nodes.With(func(c *petrel.Config) { c.Secret = "right" }))
	ctx := context.Background()
	for _, secret := range []string{"wrong", ""} {
		c, err := petrel.Dial(ctx, "tcp://"+n.ListenAddr(), petrel.DialOptions{Name: "app-1", Secret: secret, Logger: quiet})
		if !errors.Is(err, session.ErrAuth) {
			if c != nil {
				c.Close()
			}
			t.Fatalf("dial with secret %q: %v, want ErrAuth", secret, err)
		}
		if !strings.Contains(err.Error(), "secret") {
			t.Errorf("the error does not say to check the secret: %v", err)
		}
	}
	// The node counts a failure after it told the client.
	petreltest.Eventually(t, "2 authentication failures counted", func() bool { return n.ReceiverStats().AuthFailed == 2 })
	c := nodes.Dial(t, n, petrel.DialOptions{Secret: "right"})
	if c.Node().Name != "plant-7" {
		t.Fatalf("connected to %+v", c.Node())
	}
	if _, err := petrel.Dial(ctx, "http://"+n.ListenAddr(), petrel.DialOptions{}); !errors.Is(err, address.ErrConnector) {
		t.Fatalf("dial of an http URL: %v", err)
	}
	_, err := petrel.Dial(ctx, "tcp://"+n.ListenAddr(), petrel.DialOptions{Name: "bad name"})
	if err == nil || !strings.Contains(err.Error(), `client's identity, and name "bad name" has ' '`) || errors.Is(err, message.ErrDestination) {
		t.Fatalf("dial with an invalid client name: %v; want the name's fault, not a destination's", err)
	}
}

func TestRemoteResentPublishIsStoredOnce(t *testing.T) {
	n := nodes.Open(t, nodes.Name("plant-7"), nodes.Listen("127.0.0.1:0"))
	p := nodes.Dial(t, n, petrel.DialOptions{}).Producer()
	m := p.CreateDataMessage("orders")
	m.Body = []byte("once")
	for range 3 {
		if err := p.Send(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	n.Sync(context.Background())
	if st, _ := n.QueueStat("orders"); st.Depth != 1 || st.Deduped != 2 {
		t.Fatalf("after sending one message 3 times: %+v, want depth 1 and 2 deduped", st)
	}
}

func TestRemoteAccessRules(t *testing.T) {
	n := nodes.Open(t, nodes.Name("plant-7"), nodes.Listen("127.0.0.1:0"), nodes.With(func(c *petrel.Config) {
		c.Access = []petrel.AccessRule{{Identity: "app-1", Send: []string{"orders"}, Consume: []string{"orders"}}}
	}))
	c := nodes.Dial(t, n, petrel.DialOptions{})
	p := c.Producer()
	ctx := context.Background()
	if err := p.Send(ctx, p.CreateDataMessage("orders")); err != nil {
		t.Fatal(err)
	}
	err := p.Send(ctx, p.CreateDataMessage("secret"))
	if !errors.Is(err, petrel.ErrDenied) || !strings.Contains(err.Error(), `"app-1" may not send to "secret"`) {
		t.Fatalf("send to secret: %v, want ErrDenied with the reason", err)
	}
	if _, err := c.Consumer("secret"); !errors.Is(err, petrel.ErrDenied) {
		t.Fatalf("consumer of secret: %v, want ErrDenied", err)
	}
	d := receive(t, consumer(t, c, "orders"))
	d.Ack()
	// Another client, another name: nothing is allowed.
	other := nodes.Dial(t, n, petrel.DialOptions{Name: "app-2"})
	if err := other.Producer().Send(ctx, other.Producer().CreateDataMessage("orders")); !errors.Is(err, petrel.ErrDenied) {
		t.Fatalf("app-2 send: %v", err)
	}
	if st := n.ReceiverStats(); st.ClientDenied != 3 || st.ClientDelivered != 1 {
		t.Fatalf("receiver stats: denied %d delivered %d, want 3 and 1", st.ClientDenied, st.ClientDelivered)
	}
	// The node's own producer is not subject to the rules.
	sendOne(t, n, "secret", "local")
}

// The connection to the node is cut again and again while a client sends
// and consumes: every message is stored once and consumed, and the
// client's goroutines and the node's leases are all accounted for.
func TestRemoteReconnectResendsAndResubscribes(t *testing.T) {
	n := nodes.Open(t, nodes.Name("plant-7"), nodes.Listen("127.0.0.1:0"))
	proxy := petreltest.NewProxy(t, n.ListenAddr())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := dialVia(t, proxy, petrel.DialOptions{Window: 64, ConsumerWindow: 32})
	cons, err := c.Consumer("orders")
	if err != nil {
		t.Fatal(err)
	}
	const total = 2000
	seen := make(map[string]int, total)
	consumed := make(chan error, 1)
	go func() {
		for len(seen) < total {
			d, err := cons.Receive(ctx)
			if err != nil {
				consumed <- fmt.Errorf("received %d of %d: %w", len(seen), total, err)
				return
			}
			seen[string(d.Body)]++
			d.Ack() // may be lost with the connection: the message comes again
		}
		consumed <- nil
	}()
	p := c.Producer()
	pending := make([]*petrel.Pending, 0, total)
	cuts := 0
	for i := range total {
		m := p.CreateDataMessage("orders")
		m.Body = []byte(fmt.Sprint(i))
		pending = append(pending, p.SendAsync(m))
		if i%400 == 200 && proxy.Cut() > 0 {
			cuts++
		}
	}
	for i, pd := range pending {
		if err := pd.Wait(ctx); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	if err := <-consumed; err != nil {
		t.Fatal(err)
	}
	if cuts < 3 {
		t.Fatalf("only %d cuts happened", cuts)
	}
	n.Sync(ctx)
	if st, _ := n.QueueStat("orders"); st.Enqueued != total {
		t.Fatalf("%d stored for %d sent: a resend was stored twice (%+v)", st.Enqueued, total, st)
	}
	// Acks lost in a cut leave messages to deliver again, and the last
	// acks may still be on their way: receive until the queue is empty.
	for {
		n.Sync(ctx)
		st, _ := n.QueueStat("orders")
		if st.Depth == 0 {
			break
		}
		rctx, rcancel := context.WithTimeout(ctx, 100*time.Millisecond)
		d, err := cons.Receive(rctx)
		rcancel()
		if err == nil {
			if seen[string(d.Body)] == 0 {
				t.Fatalf("a message never sent: %q", d.Body)
			}
			d.Ack()
		} else if ctx.Err() != nil {
			t.Fatalf("drain: %v (queue %+v)", err, st)
		}
	}
}

func TestRemoteTLS(t *testing.T) {
	ca := newCA(t, "ca")
	n := nodes.Open(t, nodes.Name("plant-7"), nodes.Listen("127.0.0.1:0"), nodes.With(func(c *petrel.Config) {
		c.TLS = ca.nodeTLS(t, "plant-7", ca, petrel.ClientAuthRequireAndVerify)
	}))
	cfg, err := ca.nodeTLS(t, "app-1", ca, "").ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := petrel.Dial(ctx, "tls://"+n.ListenAddr(), petrel.DialOptions{Name: "app-1", TLS: cfg, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p := c.Producer()
	m := p.CreateDataMessage("orders")
	m.Body = []byte("over tls")
	if err := p.Send(ctx, m); err != nil {
		t.Fatal(err)
	}
	if d := receive(t, consumer(t, c, "orders")); string(d.Body) != "over tls" {
		t.Fatalf("got %q", d.Body)
	} else {
		d.Ack()
	}
	// Plain TCP to a TLS listener, and a name the certificate does not
	// carry, are refused.
	short, cancel2 := context.WithTimeout(ctx, 2*time.Second)
	defer cancel2()
	if c, err := petrel.Dial(short, "tcp://"+n.ListenAddr(), petrel.DialOptions{Name: "app-1", Logger: quiet, HandshakeTimeout: time.Second}); err == nil {
		c.Close()
		t.Fatal("plain TCP to a TLS listener")
	}
	if c, err := petrel.Dial(ctx, "tls://"+n.ListenAddr(), petrel.DialOptions{Name: "app-9", TLS: cfg, Logger: quiet}); !errors.Is(err, session.ErrAuth) {
		if c != nil {
			c.Close()
		}
		t.Fatalf("a name the certificate does not carry: %v", err)
	}
}

// A remote consumer's buffer is bounded by its window: the node pushes no
// more than that ahead of the application.
func TestRemoteConsumerWindowBoundsPushes(t *testing.T) {
	n := nodes.Open(t, nodes.Name("plant-7"), nodes.Listen("127.0.0.1:0"))
	c := nodes.Dial(t, n, petrel.DialOptions{ConsumerWindow: 8})
	p := c.Producer()
	for range 100 {
		if err := p.Send(context.Background(), p.CreateDataMessage("orders")); err != nil {
			t.Fatal(err)
		}
	}
	cons := consumer(t, c, "orders")
	inFlight := func() int64 { st, _ := n.QueueStat("orders"); return st.InFlight }
	delivered := func() int64 { return n.ReceiverStats().ClientDelivered }
	// No timer decides how many come: the credit does. With its 8 spent,
	// the node has no credit to push a 9th, so the check needs no pause:
	// every push is counted, and the counts must be exactly 8 here and
	// exactly 12 below, after a grant of 4. A push past the window would
	// show as a count above them (and the client ends a session that sends
	// past its window, which gives all back).
	petreltest.Eventually(t, "8 leased and pushed to a consumer of window 8", func() bool {
		return inFlight() == 8 && delivered() == 8
	}, func() string { return fmt.Sprintf("%d leased, %d pushed", inFlight(), delivered()) })
	// Taking deliveries earns credit in batches of a quarter window; what
	// was taken and not settled stays leased.
	for range 4 {
		receive(t, cons)
	}
	petreltest.Eventually(t, "12 leased after 4 taken", func() bool { return inFlight() == 12 })
	if got := n.ReceiverStats().ClientDelivered; got != 12 {
		t.Fatalf("%d pushed after 4 taken, want 12", got)
	}
	// Closing the consumer gives back all twelve.
	cons.Close()
	petreltest.Eventually(t, "nothing leased once the consumer closed", func() bool { return inFlight() == 0 })
}

// Closing a client stops the listeners of its consumers, and sends the
// acks of what they handled before it closes the connection.
func TestRemoteCloseStopsListenersAndFlushesAcks(t *testing.T) {
	n := nodes.Open(t, nodes.Name("plant-7"), nodes.Listen("127.0.0.1:0"))
	ctx := context.Background()
	c, err := petrel.Dial(ctx, "tcp://"+n.ListenAddr(), petrel.DialOptions{Name: "app-1", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	p := c.Producer()
	for range 50 {
		if err := p.Send(ctx, p.CreateDataMessage("orders")); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := c.Consumer("orders")
	if err != nil {
		t.Fatal(err)
	}
	handled := make(chan struct{}, 50)
	l, err := cons.Listen(func(context.Context, *petrel.Delivery) error {
		handled <- struct{}{}
		return nil
	}, petrel.ListenOptions{Concurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	for range 50 {
		<-handled
	}
	c.Close()
	if h, _, _ := l.Counts(); h != 50 {
		t.Fatalf("handled %d", h)
	}
	// The acks were sent before the connection closed; the node applies
	// them as they come.
	petreltest.Eventually(t, "every message acked after the client closed", func() bool {
		n.Sync(ctx)
		st, _ := n.QueueStat("orders")
		return st.Depth == 0 && st.InFlight == 0
	})
	if err := p.Send(ctx, p.CreateDataMessage("orders")); !errors.Is(err, petrel.ErrClosed) {
		t.Fatalf("send after close: %v", err)
	}
	if _, err := cons.Receive(ctx); !errors.Is(err, petrel.ErrClosed) {
		t.Fatalf("receive after close: %v", err)
	}
	if _, err := cons.Listen(func(context.Context, *petrel.Delivery) error { return nil }, petrel.ListenOptions{}); !errors.Is(err, petrel.ErrClosed) {
		t.Fatalf("listen after close: %v", err)
	}
}

// A node that stops ends its clients' sessions; their consumers wait for
// it to come back, and a new node on the same port and data serves them.
func TestRemoteNodeRestart(t *testing.T) {
	n, cfg := openRestartable(t)
	var err error
	c := nodes.Dial(t, n, petrel.DialOptions{})
	cons := consumer(t, c, "orders")
	n.Close()
	n, err = petrel.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	p := c.Producer()
	m := p.CreateDataMessage("orders")
	m.Body = []byte("after restart")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Send(ctx, m); err != nil {
		t.Fatal(err)
	}
	d, err := cons.Receive(ctx)
	if err != nil || string(d.Body) != "after restart" {
		t.Fatalf("receive after the node restarted: %v %v", d, err)
	}
	d.Ack()
	c.Close()
}

// A node whose link window is below the client's windows grants its
// consumers less; the client keeps to it and still flows. (A publish
// session is granted at least DefaultClientWindow: see
// TestRemoteDefaultPublishWindow.)
func TestRemoteNodeWindowBelowClientWindows(t *testing.T) {
	n := nodes.Open(t, nodes.Name("plant-7"), nodes.Listen("127.0.0.1:0"), nodes.With(func(c *petrel.Config) { c.Link.Window = 8 }))
	c := nodes.Dial(t, n, petrel.DialOptions{Window: 100, ConsumerWindow: 100})
	p := c.Producer()
	pending := make([]*petrel.Pending, 0, 200)
	for range 200 {
		pending = append(pending, p.SendAsync(p.CreateDataMessage("orders")))
	}
	for _, pd := range pending {
		if err := pd.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	cons := consumer(t, c, "orders")
	// Pushed and not yet taken is what the consumer's window bounds; the
	// node's window of 8 must win over the 100 asked. It is read before
	// each receive, when every earlier one was counted, so a credit the
	// client library granted and the test did not count yet cannot inflate
	// it.
	const window = 8
	most := int64(0)
	for taken := range int64(200) {
		ahead := n.ReceiverStats().ClientDelivered - taken
		if ahead > window {
			t.Fatalf("%d pushed ahead of the application after %d taken; the window is %d", ahead, taken, window)
		}
		most = max(most, ahead)
		receive(t, cons).Ack()
	}
	t.Logf("at most %d pushed ahead, window %d", most, window)
}

// Kept for tests that still call them: new tests use
// petreltest.Eventually and nodes.Dial.

func eventually(t *testing.T, cond func() bool, what string) {
	t.Helper()
	petreltest.Eventually(t, what, cond)
}

func dial(t *testing.T, n *petrel.Node, opts petrel.DialOptions) *petrel.Client {
	t.Helper()
	return nodes.Dial(t, n, opts)
}

// A client's connection carries a bounded number of sessions: one for
// its producers, one per consumer. The consumers past it go on another
// connection the client opens, and when that one drops they subscribe
// again on a new one, without the others noticing; when every connection
// drops, all of them come back. Once its consumers closed, the client
// closes the connection past the first.
func TestRemoteConsumersPastOneConnection(t *testing.T) {
	n := nodes.Open(t, nodes.Name("plant-7"), nodes.Listen("127.0.0.1:0"))
	proxy := petreltest.NewProxy(t, n.ListenAddr())
	t.Cleanup(petrel.SetIdleConnCheck(20 * time.Millisecond)) // after the client's Close
	c := dialVia(t, proxy, petrel.DialOptions{ConsumerWindow: 4})
	total := session.DefaultMaxSessions + 8
	cons := openConsumers(t, c, total)
	if got := petrel.ClientConns(c); got != 2 {
		t.Fatalf("%d connections for %d consumers, want 2", got, total)
	}
	first, last := 0, total-1
	roundTrip(t, c, cons, first, last)
	if !proxy.CutLast() {
		t.Fatal("no connection to cut")
	}
	roundTrip(t, c, cons, last, first, total-2)
	petreltest.Eventually(t, "two connections again", func() bool { return petrel.ClientConns(c) == 2 })
	if proxy.Cut() == 0 {
		t.Fatal("no connection to cut")
	}
	roundTrip(t, c, cons, first, last, total/2)
	petreltest.Eventually(t, "two connections again after the cut", func() bool { return petrel.ClientConns(c) == 2 })
	for _, cn := range cons[1:] { // which are past the first is random since the cut
		cn.Close()
	}
	petreltest.Eventually(t, "the connection past the first closed once its consumers did", func() bool { return petrel.ClientConns(c) == 1 })
	roundTrip(t, c, cons, first)
}

// When a connection past the first drops and another cannot be dialled
// (here the node's side refuses it), its consumers wait, neither ended
// nor lost, and come back once a connection can be made again.
func TestRemoteConsumersWaitForAnotherConnection(t *testing.T) {
	n := nodes.Open(t, nodes.Name("plant-7"), nodes.Listen("127.0.0.1:0"))
	proxy := petreltest.NewProxy(t, n.ListenAddr())
	c := dialVia(t, proxy, petrel.DialOptions{ConsumerWindow: 4, HandshakeTimeout: 2 * time.Second})
	total := session.DefaultMaxSessions + 2
	cons := openConsumers(t, c, total)
	last := total - 1
	proxy.Refuse(true)
	if !proxy.CutLast() {
		t.Fatal("no connection to cut")
	}
	p := c.Producer()
	m := p.CreateDataMessage(fmt.Sprint("q", last))
	m.Body = []byte("while no connection can be made")
	ctx, cancel := context.WithTimeout(context.Background(), petreltest.Patience)
	defer cancel()
	if err := p.Send(ctx, m); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 500*time.Millisecond)
	_, err := cons[last].Receive(wctx)
	wcancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("consumer %d while no connection can be made: %v, want it to wait", last, err)
	}
	proxy.Refuse(false)
	d, err := cons[last].Receive(ctx)
	if err != nil {
		t.Fatalf("consumer %d once a connection can be made: %v", last, err)
	}
	if string(d.Body) != "while no connection can be made" {
		t.Fatalf("consumer %d received %q", last, d.Body)
	}
	if err := d.Ack(); err != nil {
		t.Fatal(err)
	}
	roundTrip(t, c, cons, 0, last)
}

// Past the connections a client opens, the next consumer gets an error
// that says so and what to do, and the consumers before it still work.
// The bound is lowered to one connection past the first; PETREL_LONG=1
// runs it at the real bound, session.MaxConnsPerPeer connections in all
// (16,383 consumers):
//
//	PETREL_LONG=1 go test -run TestRemoteConsumersPastTheConnectionBound -v .
func TestRemoteConsumersPastTheConnectionBound(t *testing.T) {
	conns := 2
	if os.Getenv("PETREL_LONG") == "1" {
		conns = session.MaxConnsPerPeer
	}
	defer petrel.SetMaxExtraConns(conns - 1)()
	fit := conns*session.DefaultMaxSessions - 1 // the producers' session is one
	// Each consumer's address is a queue of its own.
	n := nodes.Open(t, nodes.Name("plant-7"), nodes.Listen("127.0.0.1:0"), nodes.With(func(c *petrel.Config) { c.MaxAutoQueues = fit + 1 }))
	c := nodes.Dial(t, n, petrel.DialOptions{ConsumerWindow: 4})
	cons := openConsumers(t, c, fit)
	if got := petrel.ClientConns(c); got != conns {
		t.Fatalf("%d consumers on %d connections, want %d", fit, got, conns)
	}
	if _, err := c.Consumer("one-more"); !errors.Is(err, session.ErrLimit) || !strings.Contains(err.Error(), "Dial another client") {
		t.Fatalf("consumer past %d connections: %v, want ErrLimit with what to do", conns, err)
	}
	roundTrip(t, c, cons, 0, fit/2, fit-1)
}

// openConsumers opens consumers of q0 … q<n-1>, failing t at the first
// error.
func openConsumers(t *testing.T, c *petrel.Client, n int) []*petrel.Consumer {
	t.Helper()
	cons := make([]*petrel.Consumer, n)
	for i := range n {
		var err error
		if cons[i], err = c.Consumer(fmt.Sprint("q", i)); err != nil {
			t.Fatalf("consumer %d of %d: %v", i, n, err)
		}
	}
	return cons
}

// roundTrip sends a message to the address of each consumer of cons it
// names, through c, and has that consumer receive and ack it, waiting
// for reconnects.
func roundTrip(t *testing.T, c *petrel.Client, cons []*petrel.Consumer, which ...int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := c.Producer()
	for _, i := range which {
		m := p.CreateDataMessage(fmt.Sprint("q", i))
		m.Body = []byte(fmt.Sprint("to ", i))
		if err := p.Send(ctx, m); err != nil {
			t.Fatalf("send to q%d: %v", i, err)
		}
		d, err := cons[i].Receive(ctx)
		if err != nil {
			t.Fatalf("consumer %d: %v", i, err)
		}
		if string(d.Body) != fmt.Sprint("to ", i) {
			t.Fatalf("consumer %d received %q", i, d.Body)
		}
		if err := d.Ack(); err != nil {
			t.Fatalf("consumer %d: ack: %v", i, err)
		}
	}
}

// openRestartable opens a node listening on a free port, and returns it
// with its configuration pinned to that port and its data directory, so
// that a node opened again from it comes back where its clients dial.
func openRestartable(t *testing.T) (*petrel.Node, petrel.Config) {
	t.Helper()
	cfg := petrel.Config{Name: "plant-7", DataDir: t.TempDir(), Logger: quiet, Listen: "127.0.0.1:0"}
	n, err := petrel.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listen = n.ListenAddr()
	return n, cfg
}
