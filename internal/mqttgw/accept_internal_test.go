package mqttgw

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
	"github.com/gorilla/websocket"

	"github.com/petrelmq/petrel/internal/petreltest"
)

// connectOnly is a Backend that lets anyone connect, and has nothing to
// publish to or subscribe from.
type connectOnly struct{ Backend }

func (connectOnly) Authenticate(username string, _ []byte, _ string) (string, string, error) {
	return username, "", nil
}
func (connectOnly) Connect(context.Context, Conn) error                { return nil }
func (connectOnly) Disconnect(Conn)                                    {}
func (connectOnly) Admitted(Conn) error                                { return nil }
func (connectOnly) Marks(context.Context, string) ([]string, error)    { return nil, nil }
func (connectOnly) Unmark(context.Context, ...string) error            { return nil }
func (connectOnly) Subscriptions() []string                            { return nil }
func (connectOnly) Unsubscribe(ctx context.Context, name string) error { return nil }
func (connectOnly) AuthorizeSys(Conn) error                            { return errors.New("no") }
func (connectOnly) AuthorizeSubscribe(c Conn, pattern string) error    { return errors.New("no") }

// startGateway starts a gateway with a TCP and a WebSocket listener on
// loopback, logging into the returned buffer.
func startGateway(t *testing.T) (*Gateway, *petreltest.SyncBuffer) {
	t.Helper()
	log := &petreltest.SyncBuffer{}
	g, err := Start(Config{Listen: "127.0.0.1:0", WebSocket: "127.0.0.1:0", DataDir: t.TempDir(),
		Logger: slog.New(slog.NewTextHandler(log, nil))}, connectOnly{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g, log
}

// mqttConnects reports whether an MQTT 5 client connects to the TCP
// listener at addr.
func mqttConnects(t *testing.T, addr string) error {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return err
	}
	c := paho.NewClient(paho.ClientConfig{Conn: nc})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := c.Connect(ctx, &paho.Connect{ClientID: "probe", CleanStart: true}); err != nil {
		nc.Close()
		return err
	}
	_ = c.Disconnect(&paho.Disconnect{})
	<-c.Done()
	return nil
}

// wsUpgrades reports whether the WebSocket listener at addr upgrades a
// request.
func wsUpgrades(addr string) error {
	d := websocket.Dialer{Subprotocols: []string{"mqtt"}, HandshakeTimeout: 2 * time.Second}
	c, _, err := d.Dial("ws://"+addr+"/mqtt", nil)
	if err != nil {
		return err
	}
	return c.Close()
}

// A listener whose socket fails under the gateway, not closed by it, is
// not left to die in silence, as mochi's Serve did (it returns at the
// first Accept error): the gateway logs an error naming it and says so
// in Err, which the node's /readyz answers with, and in Stats. The other
// listener still serves.
func TestListenerThatStopsIsReported(t *testing.T) {
	g, log := startGateway(t)
	if err := mqttConnects(t, g.Addr()); err != nil {
		t.Fatalf("before: %v", err)
	}
	if g.Err() != nil {
		t.Fatalf("Err %v while both listeners serve", g.Err())
	}
	l, ok := g.srv.Listeners.Get("mqtt")
	if !ok {
		t.Fatal("no mqtt listener")
	}
	// The socket under acceptretry, closed by another hand: its Accept
	// fails with an error that does not pass.
	l.(corked).accept.Listener.Close()
	petreltest.Eventually(t, "the stopped listener reported", func() bool { return g.Err() != nil })
	err := g.Err()
	if !errors.Is(err, net.ErrClosed) || !strings.Contains(err.Error(), "mqtt listener mqtt on "+g.Addr()+" stopped accepting connections") {
		t.Fatalf("Err %q, want it to name the listener, its address and wrap the accept error", err)
	}
	if !strings.Contains(log.String(), `level=ERROR msg="mqtt listener stopped accepting connections`) {
		t.Fatalf("no error logged:\n%s", log)
	}
	if st := g.Stats(); st.ListenerError != err.Error() {
		t.Fatalf("Stats.ListenerError %q, want %q", st.ListenerError, err)
	}
	if err := wsUpgrades(g.WebSocketAddr()); err != nil {
		t.Fatalf("the WebSocket listener stopped with the TCP one: %v", err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if g.Err() != err {
		t.Fatalf("Err after Close %v, want still %v", g.Err(), err)
	}
}

// The same of the WebSocket listener, whose HTTP server returns at an
// Accept error that does not pass.
func TestWebSocketListenerThatStopsIsReported(t *testing.T) {
	g, log := startGateway(t)
	g.ws.ln.Listener.Close()
	petreltest.Eventually(t, "the stopped listener reported", func() bool { return g.Err() != nil })
	if err := g.Err(); !errors.Is(err, net.ErrClosed) || !strings.Contains(err.Error(), "mqtt listener mqtt-ws on") {
		t.Fatalf("Err %v", err)
	}
	if !strings.Contains(log.String(), "level=ERROR") {
		t.Fatalf("no error logged:\n%s", log)
	}
	if err := mqttConnects(t, g.Addr()); err != nil {
		t.Fatalf("the TCP listener stopped with the WebSocket one: %v", err)
	}
}

// Listeners closed by Close are no failure: nothing is reported.
func TestListenersClosedByCloseAreNoFailure(t *testing.T) {
	g, log := startGateway(t)
	if err := mqttConnects(t, g.Addr()); err != nil {
		t.Fatal(err)
	}
	if err := wsUpgrades(g.WebSocketAddr()); err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // for the listeners' Serve to return
	if g.Err() != nil || strings.Contains(log.String(), "level=ERROR") {
		t.Fatalf("Err %v after Close; log:\n%s", g.Err(), log)
	}
}
