package mqttgw

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"github.com/mochi-mqtt/server/v2/listeners"

	"github.com/petrelmq/petrel/internal/acceptretry"
)

// wsListener is the MQTT over WebSocket listener (MQTT 5 chapter 6):
// any path, the "mqtt" subprotocol, MQTT packets carried in binary
// frames, which may hold several packets or part of one.
//
// mochi's own (listeners.Websocket) is not used: it binds only in Serve,
// so a port in use went unreported by Start and port 0 could not be
// told; and it hides the TLS connection behind an unexported type, so a
// client certificate could not be the identity over wss. The protocol is
// still mochi's: this only turns an upgraded request into a net.Conn.
//
// Bounds: a connection awaits its CONNECT from its accept on, before its
// upgrade: it takes a place among the connections awaiting theirs as it
// is accepted, and one past maxConnecting is closed at once, before
// net/http starts a goroutine for it (wsBound). Its TLS handshake must
// end within wsHeaderTimeout, and its upgrade request's header be read
// within wsHeaderTimeout and wsMaxHeader bytes; a request that is no upgrade is answered and its
// connection closed (no keep-alive). The upgraded connection keeps its
// place, and has connectTimeout to send its CONNECT (corked.Serve; mochi
// then sets the keep-alive deadline). Packet sizes are mochi's
// decoder's, which reads the frames as a stream.
type wsListener struct {
	id  string
	tls *tls.Config
	log *slog.Logger
	g   *Gateway

	// ln is the bound socket, which Start made (so that it reports a
	// port in use) and which retries the accept errors that pass.
	ln       *acceptretry.Listener
	bound    net.Listener // ln as the HTTP server accepts from it: wsBound, under TLS
	srv      *http.Server
	upgrader websocket.Upgrader

	mu        sync.Mutex
	closed    bool
	conns     map[*wsConn]struct{} // upgraded, until establish returns
	establish listeners.EstablishFn
	serving   sync.WaitGroup // Serve, and each upgraded connection
}

const (
	wsHeaderTimeout = 10 * time.Second
	wsMaxHeader     = 16 << 10
	// wsConnectTimeout is the upgraded connection's read deadline until
	// its guard (corked.Serve) replaces it with connectTimeout's.
	wsConnectTimeout = 30 * time.Second
)

// newWSListener serves ln, bound by g, as MQTT over WebSocket (over TLS
// with tc).
func newWSListener(id string, ln *acceptretry.Listener, tc *tls.Config, g *Gateway) *wsListener {
	return &wsListener{
		id: id, ln: ln, tls: tc, g: g, conns: map[*wsConn]struct{}{},
		upgrader: websocket.Upgrader{
			Subprotocols: []string{"mqtt"}, // MQTT-6.0.0-3
			// Browsers from any page may connect, as to any MQTT
			// broker: the credentials are in CONNECT, not in cookies,
			// so another origin gains nothing a client elsewhere has not.
			CheckOrigin: func(*http.Request) bool { return true },
		},
	}
}

func (l *wsListener) ID() string { return l.id }

// Address is the bound address, with the port taken.
func (l *wsListener) Address() string { return l.ln.Addr().String() }

func (l *wsListener) Protocol() string {
	if l.tls != nil {
		return "wss"
	}
	return "ws"
}

// Init makes the HTTP server. Its listener counts each connection among
// those awaiting their CONNECT as it accepts it (wsBound), under TLS, so
// that a connection in its TLS handshake counts too.
func (l *wsListener) Init(log *slog.Logger) error {
	l.log = log
	var ln net.Listener = &wsBound{Listener: l.ln, g: l.g}
	if l.tls != nil {
		ln = tls.NewListener(ln, l.tls)
	}
	l.srv = &http.Server{
		Handler:           http.HandlerFunc(l.handle),
		ReadHeaderTimeout: wsHeaderTimeout,
		MaxHeaderBytes:    wsMaxHeader,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	// One request per connection: its upgrade. A request that is none
	// is answered with an error and its connection closed, rather than
	// kept for another with no deadline, holding its place.
	l.srv.SetKeepAlivesEnabled(false)
	l.bound = ln
	return nil
}

// Serve serves until Close, or until the listener fails past retrying
// (corked.Serve notes it).
func (l *wsListener) Serve(establish listeners.EstablishFn) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.establish = establish
	l.serving.Add(1)
	l.mu.Unlock()
	defer l.serving.Done()
	if err := l.srv.Serve(l.bound); err != nil && !errors.Is(err, http.ErrServerClosed) {
		l.log.Debug("mqtt websocket listener stopped", slog.Any("error", err))
	}
}

// handle upgrades a request and serves it as an MQTT connection until it
// ends.
func (l *wsListener) handle(w http.ResponseWriter, r *http.Request) {
	c, err := l.upgrader.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader answered it with an HTTP error
	}
	wc := &wsConn{Conn: c.NetConn(), ws: c, slot: slotOf(c.NetConn())}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		_ = wc.Close()
		return
	}
	l.conns[wc] = struct{}{}
	l.serving.Add(1)
	establish := l.establish
	l.mu.Unlock()
	defer func() {
		_ = wc.Close()
		l.mu.Lock()
		delete(l.conns, wc)
		l.mu.Unlock()
		l.serving.Done()
	}()
	_ = wc.SetReadDeadline(time.Now().Add(wsConnectTimeout))
	if err := establish(l.id, wc); err != nil {
		l.log.Debug("mqtt websocket connection ended", slog.String("remote", r.RemoteAddr), slog.Any("error", err))
	}
}

// Close stops accepting, has mochi disconnect the clients of this
// listener, closes what is left (connections that sent no CONNECT yet)
// and waits for every connection's handler. Like mochi's TCP listener, it
// calls closeClients on the first Close only (see Gateway.closeServer).
func (l *wsListener) Close(closeClients listeners.CloseFn) {
	l.mu.Lock()
	first := !l.closed
	l.closed = true
	l.mu.Unlock()
	if !first {
		l.serving.Wait()
		return
	}
	if l.srv != nil {
		// The listener, and the connections not upgraded; upgraded
		// connections are ours.
		_ = l.srv.Close()
	}
	_ = l.ln.Close() // in case Serve never ran

	closeClients(l.id)
	l.mu.Lock()
	for wc := range l.conns {
		_ = wc.Close()
	}
	l.mu.Unlock()
	l.serving.Wait()
}

// wsConn is an upgraded WebSocket connection as the stream of bytes
// mochi reads packets from: reads run through the binary messages one
// after another, each write is one binary message.
type wsConn struct {
	net.Conn // the TCP or TLS connection under the WebSocket, for addresses and deadlines
	ws       *websocket.Conn
	slot     *wsSlotConn // its place among the connections awaiting CONNECT, taken at accept
	r        io.Reader   // the message being read, nil between messages
	wmu      sync.Mutex
}

// errWSText is returned by wsConn.Read for a text frame, which MQTT over
// WebSocket does not allow (MQTT-6.0.0-1): the connection is closed.
var errWSText = errors.New("mqtt over websocket: text frame (MQTT packets go in binary frames)")

func (c *wsConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for {
		if c.r == nil {
			typ, r, err := c.ws.NextReader()
			if err != nil {
				return 0, err
			}
			if typ != websocket.BinaryMessage {
				return 0, errWSText
			}
			c.r = r
		}
		n, err := c.r.Read(p)
		if errors.Is(err, io.EOF) {
			c.r = nil
			err = nil
		}
		if n > 0 || err != nil {
			return n, err
		}
	}
}

func (c *wsConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.ws.WriteMessage(websocket.BinaryMessage, p); err != nil {
		return 0, fmt.Errorf("mqtt over websocket: %w", err)
	}
	return len(p), nil
}

// handOver hands the connection's place among those awaiting their
// CONNECT, taken at accept, to its guard (corked.Serve), and reports
// whether it still had it.
func (c *wsConn) handOver() (addr string, ok bool) {
	if c.slot == nil || !c.slot.handOver() {
		return "", false
	}
	return c.slot.addr, true
}

// ConnectionState is the TLS state of a wss connection, for the client
// certificate; the zero state for ws.
func (c *wsConn) ConnectionState() tls.ConnectionState {
	if tc, ok := c.Conn.(*tls.Conn); ok {
		return tc.ConnectionState()
	}
	return tls.ConnectionState{}
}

// wsBound counts each connection it accepts among those awaiting their
// CONNECT, and closes one past maxConnecting as soon as it accepts it,
// before net/http sees it, as the TCP listener's guard does: a
// websocket connection awaits its CONNECT from its accept on.
type wsBound struct {
	net.Listener
	g *Gateway
}

func (b *wsBound) Accept() (net.Conn, error) {
	for {
		c, err := b.Listener.Accept()
		if err != nil {
			return nil, err
		}
		addr := addressOf(c)
		why := b.g.connecting.take(addr)
		if why == "" {
			sc := &wsSlotConn{Conn: c, g: &b.g.connecting, addr: addr}
			sc.held.Store(true)
			return sc, nil
		}
		b.g.refuseConnecting(c, why)
	}
}

// wsSlotConn is a websocket connection's TCP connection, which holds its
// place among the connections awaiting their CONNECT until it is closed,
// or its guard takes the place over once it is upgraded.
type wsSlotConn struct {
	net.Conn
	g    *connecting
	addr string // the remote address its place counts against
	held atomic.Bool
}

func (c *wsSlotConn) Close() error {
	err := c.Conn.Close()
	if c.held.CompareAndSwap(true, false) {
		c.g.release(c.addr)
	}
	return err
}

// handOver gives the place up to the connection's guard, which counts it
// from now on; false if the connection was closed first.
func (c *wsSlotConn) handOver() bool { return c.held.CompareAndSwap(true, false) }

// slotOf is the wsSlotConn under an upgraded connection, TLS or not.
func slotOf(c net.Conn) *wsSlotConn {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	sc, _ := c.(*wsSlotConn)
	return sc
}
