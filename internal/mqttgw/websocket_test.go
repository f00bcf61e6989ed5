package mqttgw_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/packets"
	"github.com/eclipse/paho.golang/paho"
	"github.com/gorilla/websocket"

	petrel "github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/internal/mqttgw"
	"github.com/petrelmq/petrel/internal/petreltest"
	"github.com/petrelmq/petrel/internal/petreltest/mqttraw"
)

// wsClientConn is a client's WebSocket connection as the net.Conn paho
// reads and writes, as paho's autopaho makes one for ws:// and wss://
// URLs (gorilla/websocket, subprotocol "mqtt", binary messages).
type wsClientConn struct {
	*websocket.Conn
	r   io.Reader
	wmu sync.Mutex
}

func (c *wsClientConn) Read(p []byte) (int, error) {
	for {
		if c.r == nil {
			typ, r, err := c.NextReader()
			if err != nil {
				return 0, err
			}
			if typ != websocket.BinaryMessage {
				return 0, errors.New("not a binary message")
			}
			c.r = r
		}
		n, err := c.r.Read(p)
		if errors.Is(err, io.EOF) {
			c.r, err = nil, nil
		}
		if n > 0 || err != nil {
			return n, err
		}
	}
}

func (c *wsClientConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.WriteMessage(websocket.BinaryMessage, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (c *wsClientConn) SetDeadline(t time.Time) error { return c.NetConn().SetDeadline(t) }

// dialWS opens an MQTT over WebSocket connection to url.
func dialWS(t testing.TB, url string, tc *tls.Config) (net.Conn, error) {
	t.Helper()
	d := websocket.Dialer{Subprotocols: []string{"mqtt"}, TLSClientConfig: tc, HandshakeTimeout: 10 * time.Second}
	c, resp, err := d.Dial(url, nil)
	if err != nil {
		return nil, err
	}
	if resp.Header.Get("Sec-WebSocket-Protocol") != "mqtt" { // MQTT-6.0.0-4
		t.Fatalf("subprotocol %q, want mqtt", resp.Header.Get("Sec-WebSocket-Protocol"))
	}
	return &wsClientConn{Conn: c}, nil
}

// pahoOver connects an MQTT 5 paho client over conn.
func pahoOver(t testing.TB, conn net.Conn, cp *paho.Connect, cfg paho.ClientConfig) (*paho.Client, error) {
	t.Helper()
	cfg.Conn = conn
	c := paho.NewClient(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if ca, err := c.Connect(ctx, cp); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("connect: %w (%+v)", err, ca)
	}
	t.Cleanup(func() {
		_ = c.Disconnect(&paho.Disconnect{})
		<-c.Done()
	})
	return c, nil
}

// An MQTT client over ws:// publishes and subscribes like one over TCP:
// a TCP client's publish reaches it, its publish reaches a Petrel
// consumer, and its persistent session resumes over WebSocket with what
// it left unacknowledged. The listener answers the port it took, and a
// request that is no WebSocket upgrade gets an HTTP error.
func TestWebSocketPaho(t *testing.T) {
	cfg := baseConfig(t)
	cfg.MQTT.WebSocket = "127.0.0.1:0"
	tn := openNode(t, cfg)
	ws := tn.Status().MQTT.WebSocket
	if _, p, _ := net.SplitHostPort(ws); p == "" || p == "0" {
		t.Fatalf("websocket address %q", ws)
	}
	ctx := context.Background()
	pc, err := tn.Subscribe(ctx, "sensors.#", petrel.SubscribeOptions{Name: "all", Durable: true})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()

	connect := func() (*paho.Client, *received) {
		conn, err := dialWS(t, "ws://"+ws+"/mqtt", nil)
		if err != nil {
			t.Fatal(err)
		}
		r := newReceived()
		c, err := pahoOver(t, conn, &paho.Connect{ClientID: "browser-1", CleanStart: false, KeepAlive: 30,
			Properties: &paho.ConnectProperties{SessionExpiryInterval: ptr(uint32(600))}},
			paho.ClientConfig{EnableManualAcknowledgment: true, OnPublishReceived: []func(paho.PublishReceived) (bool, error){r.handler}})
		if err != nil {
			t.Fatal(err)
		}
		return c, r
	}
	c, r := connect()
	subscribe(t, c, "sensors/line-1/#", 1)

	tcp, _ := pahoClient(t, tn, &paho.Connect{ClientID: "plc", CleanStart: true}, paho.ClientConfig{})
	if _, err := publish(tcp, &paho.Publish{Topic: "sensors/line-1/temp", QoS: 1, Payload: []byte("21.5")}); err != nil {
		t.Fatal(err)
	}
	got := r.next(t)
	if got.Topic != "sensors/line-1/temp" || string(got.Payload) != "21.5" || got.QoS != 1 {
		t.Fatalf("over websocket got %s %q qos %d", got.Topic, got.Payload, got.QoS)
	}
	if err := c.Ack(got); err != nil {
		t.Fatal(err)
	}
	// paho sends a manual ack lazily, in order: wait for the node to take it.
	petreltest.Eventually(t, "ack over websocket", func() bool { return tn.Status().MQTT.Acked == 1 })

	pr, err := publish(c, &paho.Publish{Topic: "sensors/line-1/set", QoS: 2, Payload: []byte("on"),
		Properties: &paho.PublishProperties{User: paho.UserProperties{{Key: "from", Value: "ws"}}}})
	if err != nil || pr.ReasonCode != 0 {
		t.Fatalf("publish over websocket: %+v %v", pr, err)
	}
	for _, want := range []string{"sensors.line-1.temp", "sensors.line-1.set"} {
		d, err := pc.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_ = d.Ack()
		if d.Destination != want {
			t.Fatalf("petrel got %s, want %s", d.Destination, want)
		}
		if v, ok := d.Properties.Get("from"); want == "sensors.line-1.set" && (!ok || v.Str() != "ws") {
			t.Fatalf("user property over websocket: %v", v)
		}
	}
	// Its own publish came back to it (no NoLocal); leave it unacked, and
	// drop the connection: the session resumes over a new WebSocket.
	if got := r.next(t); got.Topic != "sensors/line-1/set" {
		t.Fatalf("got %s", got.Topic)
	}
	c.TerminateConnectionForTest()
	_, r = connect()
	if got := r.next(t); got.Topic != "sensors/line-1/set" || !got.Duplicate() {
		t.Fatalf("resumed over websocket: %s dup=%v", got.Topic, got.Duplicate())
	}

	resp, err := http.Get("http://" + ws + "/mqtt")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("plain GET: %s", resp.Status)
	}
	// Packets need not align with frames (MQTT-6.0.0-2): a CONNECT split
	// over two binary frames, then PINGREQ and DISCONNECT in one.
	d := websocket.Dialer{Subprotocols: []string{"mqtt"}}
	wc, _, err := d.Dial("ws://"+ws+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer wc.Close()
	var b bytes.Buffer
	if _, err := (&packets.Connect{ProtocolName: "MQTT", ProtocolVersion: 5, ClientID: "split", CleanStart: true, KeepAlive: 30}).WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	raw := b.Bytes()
	for _, part := range [][]byte{raw[:5], raw[5:]} {
		if err := wc.WriteMessage(websocket.BinaryMessage, part); err != nil {
			t.Fatal(err)
		}
	}
	rc := mqttraw.New(t, &wsClientConn{Conn: wc})
	if p := rc.Read(); p.Type != packets.CONNACK || p.Content.(*packets.Connack).ReasonCode != 0 {
		t.Fatalf("connack over split frames: %v", p)
	}
	b.Reset()
	_, _ = packets.NewControlPacket(packets.PINGREQ).WriteTo(&b)
	_, _ = (&packets.Disconnect{}).WriteTo(&b)
	if err := wc.WriteMessage(websocket.BinaryMessage, b.Bytes()); err != nil {
		t.Fatal(err)
	}
	if p := rc.Read(); p.Type != packets.PINGRESP {
		t.Fatalf("after pingreq: %v", p)
	}
	// A text frame is no MQTT: the connection is closed.
	wc, _, err = d.Dial("ws://"+ws+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer wc.Close()
	if err := wc.WriteMessage(websocket.TextMessage, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	_ = wc.SetReadDeadline(time.Now().Add(petreltest.Patience))
	if _, _, err := wc.ReadMessage(); err == nil {
		t.Fatal("a text frame was answered")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("a text frame left the connection open")
	}
	if st := tn.Status().MQTT; st.Connections != 4 || st.Published[1] != 1 || st.Published[2] != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// With mqtt.tls the WebSocket listener is wss with the node's TLS
// configuration: under mutual TLS a client certificate's Common Name is
// the identity the access rules judge, and a client without one does
// not get through the handshake.
func TestWebSocketTLSClientCertificate(t *testing.T) {
	ca, tn := mutualTLSNode(t, func(c *petrel.Config) { c.MQTT.WebSocket = "127.0.0.1:0" })
	ctx := context.Background()
	url := "wss://" + tn.Status().MQTT.WebSocket + "/mqtt"
	pool := x509.NewCertPool()
	pem, err := os.ReadFile(ca.Path)
	if err != nil {
		t.Fatal(err)
	}
	pool.AppendCertsFromPEM(pem)

	dc, dk := ca.Issue(t, "dev-1")
	kp, err := tls.LoadX509KeyPair(dc, dk)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := dialWS(t, url, &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{kp}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := pahoOver(t, conn, &paho.Connect{ClientID: "dev-1", CleanStart: true}, paho.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	// Its place among the connections awaiting CONNECT, taken at accept
	// under TLS, was handed to its guard and given back at CONNECT.
	if n := tn.Status().MQTT.Connecting; n != 0 {
		t.Fatalf("%d awaiting CONNECT with the wss client connected, want 0", n)
	}
	if pr, err := publish(c, &paho.Publish{Topic: "sensors/dev-1/temp", QoS: 1, Payload: []byte("21")}); err != nil || pr.ReasonCode != 0 {
		t.Fatalf("own topic: %+v %v", pr, err)
	}
	if pr, _ := publish(c, &paho.Publish{Topic: "sensors/dev-2/temp", QoS: 1, Payload: []byte("x")}); pr == nil || pr.ReasonCode != 0x87 {
		t.Fatalf("dev-2's topic as dev-1: %+v, want 0x87", pr)
	}
	if _, err := dialWS(t, url, &tls.Config{RootCAs: pool}); err == nil {
		t.Fatal("a wss client without a certificate got through")
	}
	if _, err := dialWS(t, strings.Replace(url, "wss:", "ws:", 1), nil); err == nil {
		t.Fatal("plain ws on the wss listener got through")
	}
	petreltest.Eventually(t, "failed handshakes give their places back", func() bool { return tn.Status().MQTT.Connecting == 0 })
	if err := tn.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if d := tn.depth("all"); d != 1 {
		t.Fatalf("stored %d, want only dev-1's own publish", d)
	}
}

// A WebSocket address in use fails the node's start, with the address.
func TestWebSocketAddressInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg := baseConfig(t)
	cfg.MQTT.WebSocket = ln.Addr().String()
	n, err := petrel.Open(context.Background(), cfg)
	if err == nil {
		n.Close()
		t.Fatal("opened with the websocket address in use")
	}
	if !strings.Contains(err.Error(), ln.Addr().String()) {
		t.Fatalf("error %v does not name the address", err)
	}
}

// Keep-alive holds over WebSocket (MQTT-3.1.2-22): the node's deadlines
// reach the connection under the frames, so a silent client is
// disconnected after one and a half keep-alive periods, and one sending
// PINGREQ is not.
func TestWebSocketKeepAlive(t *testing.T) {
	cfg := baseConfig(t)
	cfg.MQTT.WebSocket = "127.0.0.1:0"
	tn := openNode(t, cfg)
	dial := func(id string) *mqttraw.Conn {
		conn, err := dialWS(t, "ws://"+tn.Status().MQTT.WebSocket+"/mqtt", nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		rc := mqttraw.New(t, conn)
		rc.Connect(&packets.Connect{ProtocolName: "MQTT", ProtocolVersion: 5, ClientID: id, CleanStart: true, KeepAlive: 1})
		return rc
	}
	live, silent := dial("pinger"), dial("silent")
	start := time.Now()
	for range 4 {
		live.Write(&packets.Pingreq{})
		if p := live.Read(); p.Type != packets.PINGRESP {
			t.Fatalf("got %v, want PINGRESP", p)
		}
		time.Sleep(500 * time.Millisecond)
	}
	_ = silent.SetReadDeadline(time.Now().Add(petreltest.Patience))
	if _, err := packets.ReadPacket(silent.Conn); err == nil {
		t.Fatal("a silent client got a packet, not a closed connection")
	}
	if waited := time.Since(start); waited >= petreltest.Patience {
		t.Fatalf("silent client closed after %v", waited)
	}
	petreltest.Eventually(t, "the pinger only connected", func() bool { return tn.Status().MQTT.Clients == 1 })
}

// A WebSocket connection awaits its CONNECT from its accept on: before
// its HTTP upgrade it holds a place among the connections awaiting their
// CONNECT, the one bound for both listeners, and one past the bound is
// closed as soon as it is accepted, counted. Before, any number of
// connections that sent nothing were each held 10 s with a goroutine,
// uncounted. The upgraded connection keeps its place (not two) until its
// CONNECT; a request that is no upgrade is answered and its connection
// closed, giving its place back.
func TestWebSocketAwaitingUpgradeBounded(t *testing.T) {
	defer mqttgw.SetConnectBounds(5*time.Second, 4, 1<<20)()
	cfg := baseConfig(t)
	cfg.MQTT.WebSocket = "127.0.0.1:0"
	cfg.Admin.Listen = "127.0.0.1:0"
	tn := openNode(t, cfg)
	ws := tn.Status().MQTT.WebSocket
	connecting := func() int64 { return tn.Status().MQTT.Connecting }
	dial := func(addr string) net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}

	// Four idle connections to the WebSocket port fill the bound; the
	// fifth is closed at once, and so is one to the TCP port.
	var idle []net.Conn
	for range 4 {
		idle = append(idle, dial(ws))
	}
	petreltest.Eventually(t, "four awaiting their upgrade counted", func() bool { return connecting() == 4 })
	if extra := dial(ws); !closedWithin(extra, 2*time.Second) {
		t.Fatal("a fifth connection awaiting its upgrade was kept")
	}
	if extra := dial(tn.MQTTAddr()); !closedWithin(extra, 2*time.Second) {
		t.Fatal("a TCP connection past the bound the WebSocket ones fill was kept")
	}
	if st := tn.Status().MQTT; st.RefusedConnecting != 2 || st.Connecting != 4 {
		t.Fatalf("refused %d, connecting %d; want 2 and 4", st.RefusedConnecting, st.Connecting)
	}
	b := metricsText(t, tn)
	for _, want := range []string{"petrel_mqtt_connecting 4", `petrel_mqtt_refused_total{reason="connecting"} 2`} {
		if !strings.Contains(b, want+"\n") {
			t.Errorf("metrics lack %q", want)
		}
	}
	for _, c := range idle {
		c.Close()
	}
	petreltest.Eventually(t, "none awaiting CONNECT once they closed", func() bool { return connecting() == 0 })

	// A request that is no upgrade is answered, and its connection closed
	// rather than kept for another request.
	plain := dial(ws)
	if _, err := plain.Write([]byte("GET /mqtt HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	_ = plain.SetReadDeadline(time.Now().Add(5 * time.Second))
	answer, err := io.ReadAll(plain)
	if err != nil {
		t.Fatalf("the connection of a request that is no upgrade was kept: %v (%q)", err, answer)
	}
	if !bytes.HasPrefix(answer, []byte("HTTP/1.1 400")) {
		t.Fatalf("answer %q, want 400", answer)
	}
	petreltest.Eventually(t, "its place given back", func() bool { return connecting() == 0 })

	// An upgraded connection that has not sent its CONNECT holds one
	// place, and none once it has.
	conn, err := dialWS(t, "ws://"+ws+"/mqtt", nil)
	if err != nil {
		t.Fatal(err)
	}
	petreltest.Eventually(t, "the upgraded connection counted", func() bool { return connecting() == 1 })
	time.Sleep(100 * time.Millisecond)
	if n := connecting(); n != 1 {
		t.Fatalf("an upgraded connection awaiting CONNECT counted %d times", n)
	}
	c, err := pahoOver(t, conn, &paho.Connect{ClientID: "browser", CleanStart: true}, paho.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if n := connecting(); n != 0 {
		t.Fatalf("%d awaiting CONNECT with the client connected, want 0", n)
	}
	if _, err := publish(c, &paho.Publish{Topic: "sensors/ok", QoS: 1}); err != nil {
		t.Fatal(err)
	}
	// Connected clients are not counted: four more may wait.
	for range 4 {
		dial(ws)
	}
	petreltest.Eventually(t, "four more awaiting their upgrade", func() bool { return connecting() == 4 })
	if st := tn.Status().MQTT; st.RefusedConnecting != 2 {
		t.Fatalf("refused %d, want still 2", st.RefusedConnecting)
	}
}
