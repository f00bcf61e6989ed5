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
	"time"

	"github.com/gorilla/websocket"
	"github.com/mochi-mqtt/server/v2/listeners"
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
// Bounds: an upgrade request's header is read within wsHeaderTimeout and
// wsMaxHeader bytes, and an upgraded connection must send its CONNECT
// within wsConnectTimeout (mochi then sets the keep-alive deadline).
// Packet sizes are mochi's decoder's, which reads the frames as a stream.
type wsListener struct {
	id      string
	address string
	tls     *tls.Config
	log     *slog.Logger

	ln       net.Listener
	srv      *http.Server
	upgrader websocket.Upgrader

	mu        sync.Mutex
	closed    bool
	conns     map[*wsConn]struct{} // upgraded, until establish returns
	establish listeners.EstablishFn
	serving   sync.WaitGroup // Serve, and each upgraded connection
}

const (
	wsHeaderTimeout  = 10 * time.Second
	wsMaxHeader      = 16 << 10
	wsConnectTimeout = 30 * time.Second
)

func newWSListener(id, address string, tc *tls.Config) *wsListener {
	return &wsListener{
		id: id, address: address, tls: tc, conns: map[*wsConn]struct{}{},
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

// Address is the bound address once Init ran, with the port taken.
func (l *wsListener) Address() string {
	if l.ln != nil {
		return l.ln.Addr().String()
	}
	return l.address
}

func (l *wsListener) Protocol() string {
	if l.tls != nil {
		return "wss"
	}
	return "ws"
}

// Init binds the address, so that Start reports a port in use.
func (l *wsListener) Init(log *slog.Logger) error {
	l.log = log
	ln, err := net.Listen("tcp", l.address)
	if err != nil {
		return err
	}
	if l.tls != nil {
		ln = tls.NewListener(ln, l.tls)
	}
	l.ln = ln
	l.srv = &http.Server{
		Handler:           http.HandlerFunc(l.handle),
		ReadHeaderTimeout: wsHeaderTimeout,
		MaxHeaderBytes:    wsMaxHeader,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	return nil
}

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
	if err := l.srv.Serve(l.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		l.log.Error("mqtt websocket listener stopped", slog.Any("error", err))
	}
}

// handle upgrades a request and serves it as an MQTT connection until it
// ends.
func (l *wsListener) handle(w http.ResponseWriter, r *http.Request) {
	c, err := l.upgrader.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader answered it with an HTTP error
	}
	wc := &wsConn{Conn: c.NetConn(), ws: c}
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
		_ = l.srv.Close() // the listener; upgraded connections are ours
	} else if l.ln != nil {
		_ = l.ln.Close()
	}
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
	r        io.Reader // the message being read, nil between messages
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

// ConnectionState is the TLS state of a wss connection, for the client
// certificate; the zero state for ws.
func (c *wsConn) ConnectionState() tls.ConnectionState {
	if tc, ok := c.Conn.(*tls.Conn); ok {
		return tc.ConnectionState()
	}
	return tls.ConnectionState{}
}
