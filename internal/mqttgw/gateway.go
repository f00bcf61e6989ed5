package mqttgw

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/petrelmq/petrel/internal/ratelog"
	"github.com/petrelmq/petrel/message"
)

// Config configures a Gateway.
type Config struct {
	// Listen is the host:port of the MQTT listener (TCP, or TLS when TLS
	// is set).
	Listen string
	// TLS, when set, makes Listen (and WebSocket) speak TLS; with
	// ClientAuth RequireAndVerifyClientCert a verified certificate's
	// Common Name is the client's identity.
	TLS *tls.Config
	// WebSocket, when set, is the host:port of an MQTT over WebSocket
	// listener (any path; wss with TLS, the same configuration).
	WebSocket string
	// DataDir holds mqtt.db, the retained messages and sessions.
	DataDir string
	// MaxInflight bounds the QoS 1 and 2 deliveries awaiting a client's
	// acknowledgement, per connection (default 100; the client's own
	// Receive Maximum lowers it).
	MaxInflight int
	// MaxClients bounds the clients connected at once (default 1024): one
	// past it is refused at CONNACK.
	MaxClients int
	// MaxRetained bounds the topics with a retained message (default
	// 10000): a retained publish that would add one past it is refused
	// with 0x97, and nothing of it is stored.
	MaxRetained int
	// MaxRetainedBytes bounds the bytes of the retained messages, their
	// payloads and topics (default 64 MiB): mochi keeps every one in
	// memory, and a count alone let a few publishes of the largest
	// payload take a GiB. A retained publish that would grow them past
	// it is refused, as one past MaxRetained is.
	MaxRetainedBytes int64
	// MaxSessions bounds the persistent sessions kept (default 10000): a
	// connection that would add one past it is refused at CONNACK.
	MaxSessions int
	// MaxSubscriptions bounds the topic filters one client holds (default
	// 100): each new filter past it is answered with quota exceeded (MQTT
	// 5 0x97, 3.1.1 0x80), and nothing of it is made.
	MaxSubscriptions int
	// MaxSessionExpiry caps the time a persistent session outlives its
	// connection (default 7 days, whole seconds). mochi's own default is
	// 2^32-1 s, which is forever for an MQTT 3.1.1 session (clean session
	// false has no expiry of its own) and for an MQTT 5 one asking
	// 0xFFFFFFFF: the cap is answered in CONNACK's Session Expiry
	// Interval, and each such session's durable subscriptions would
	// otherwise keep filling.
	MaxSessionExpiry time.Duration
	// SysInterval is how often the $SYS topics are published (default
	// 10s, as Mosquitto's sys_interval; whole seconds).
	SysInterval time.Duration
	// Version is what $SYS/broker/version says.
	Version string
	// Limits are the node's message limits: a publish past them is
	// refused with a reason code, and packets past MaxBody plus 64 KiB are
	// refused by the decoder.
	Limits message.Limits
	Logger *slog.Logger
}

// Conn says who an MQTT connection is, for the Backend.
type Conn struct {
	// Identity is what the client proved (see Backend.Authenticate).
	Identity string
	// Proof is what the Backend noted of the credential the client
	// proved at CONNECT (Backend.Authenticate), opaque here: Admitted
	// compares it with the credential in force, so that a client whose
	// secret changed is disconnected.
	Proof string
	// ClientID is the MQTT client identifier.
	ClientID string
	Remote   string
}

// Backend is the node, as the gateway needs it. Its methods are called
// from many connections at once.
type Backend interface {
	// Authenticate returns the identity that a username and password, or
	// a verified client certificate's Common Name (certCN, empty without
	// one), prove, and its note of the credential proved (Conn.Proof);
	// an error refuses the connection.
	Authenticate(username string, password []byte, certCN string) (identity, proof string, err error)
	// Connect and Disconnect tell the node's interceptors; Connect may
	// refuse.
	Connect(ctx context.Context, c Conn) error
	Disconnect(c Conn)
	// Admitted returns why c's identity, which it proved at CONNECT, would
	// no longer be admitted (removed from the node's identities, or its
	// secret changed since c proved it); nil if it would. Rejudge
	// disconnects such a client.
	Admitted(c Conn) error
	// AuthorizeSubscribe checks that c may subscribe to the Petrel pattern.
	AuthorizeSubscribe(c Conn, pattern string) error
	// AuthorizeSys checks that c may read the broker's $SYS topics.
	AuthorizeSys(c Conn) error
	// NewMessage returns a data message for the Petrel topic, with its
	// id, origin and timestamp.
	NewMessage(topic string) *message.Message
	// Publish runs the interceptors and the publish access rule, and
	// submits m's copies to the store. It returns once they are
	// submitted; the Commit tells when they are committed. A refusal,
	// from either, wraps a *Refusal. mark, when not empty, is a key
	// committed in the same transaction as the copies: after a crash it
	// is there if and only if they are (see Marks).
	Publish(ctx context.Context, m *message.Message, c Conn, mark string) (Commit, error)
	// Marks returns the keys that start with prefix, which Publish or
	// Mark stored and Unmark has not removed.
	Marks(ctx context.Context, prefix string) ([]string, error)
	// Mark submits key's storage, alone; the Commit tells when it is
	// durable.
	Mark(key string) (Commit, error)
	// Unmark removes keys, durably, in one commit when it can.
	Unmark(ctx context.Context, keys ...string) error
	// Subscribe makes or joins the subscription name (private when empty)
	// to the Petrel pattern.
	Subscribe(ctx context.Context, pattern, name string, durable bool, c Conn) (Subscription, error)
	// Unsubscribe deletes the durable subscription name, if it exists.
	Unsubscribe(ctx context.Context, name string) error
	// Subscriptions returns the names of the node's subscriptions.
	Subscriptions() []string
}

// Subscription is a Petrel subscription's consumer.
type Subscription interface {
	Receive(ctx context.Context) (Delivery, error)
	// Poll returns the next delivery if one is ready, or an error at
	// once.
	Poll() (Delivery, error)
	Close()
}

// Commit is a publish on its way into the store.
type Commit interface {
	// Done is closed once the publish is committed or refused.
	Done() <-chan struct{}
	// Err is, once Done is closed, why the publish was refused, or nil.
	Err() error
}

// waitCommit blocks until c is done or ctx ends.
func waitCommit(ctx context.Context, c Commit) error {
	select {
	case <-c.Done():
		return c.Err()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Delivery is one message delivered under a lease.
type Delivery interface {
	Message() *message.Message
	Attempt() int
	Ack() error
	Nack(reason string) error
}

// Refusal is a publish the node refused for good, with the MQTT reason
// code that says why.
type Refusal struct {
	Code   byte
	Reason string
}

func (r *Refusal) Error() string { return r.Reason }

// MQTT 5 reason codes the gateway answers with.
const (
	CodeUnspecified         byte = 0x80
	CodeImplementation      byte = 0x83
	CodeNotAuthorized       byte = 0x87
	CodeFilterInvalid       byte = 0x8F
	CodeTopicNameBad        byte = 0x90
	CodePacketTooLarge      byte = 0x95
	CodeQuotaExceeded       byte = 0x97
	CodePayloadFormat       byte = 0x99
	maxPacketOverhead            = 64 << 10
	defaultMaxInflight           = 100
	defaultMaxClients            = 1024
	defaultMaxRetained           = 10000
	defaultMaxRetainedBytes      = 64 << 20
	defaultMaxSessions           = 10000
	defaultMaxSubscriptions      = 100
	defaultMaxSessionExpiry      = 7 * 24 * time.Hour
	defaultSysInterval           = 10 * time.Second
	// maxTopicAliases is the most topics one MQTT 5 connection may alias
	// (a higher alias closes it, 0x94), announced in its CONNACK
	// (OnPacketEncode).
	maxTopicAliases = 10
)

// Gateway is a running MQTT listener in front of a Backend.
type Gateway struct {
	cfg     Config
	log     *slog.Logger
	be      Backend
	srv     *mqtt.Server
	store   *sessionStore
	hook    *hook
	wills   *wills
	qos2    *qos2Markers
	resends *resends
	shares  *shares
	metrics *metrics
	tcp     *listeners.Net
	ws      *wsListener
	// connecting bounds the connections that have not sent their CONNECT.
	connecting connecting
	// claims bounds the bytes the packets of connected clients claim.
	claims packetClaims
	// acceptLog holds back repeated lines of accept errors retried, one
	// key per listener.
	acceptLog ratelog.Limiter
	// closing is set once closeServer begins: a listener that stops
	// serving then is being closed, not failing.
	closing atomic.Bool
	// stopped is why a listener stopped accepting connections while the
	// gateway was not closing, the first time one did (see Err).
	stopped atomic.Pointer[error]

	// refusedLog holds back repeated lines of refused publishes, keyLog
	// those of QoS 2 deliveries' keys not kept.
	refusedLog, keyLog ratelog.Limiter

	retainer      *retainer
	retainMu      sync.Mutex
	retainPending map[string]struct{} // new retained topics being stored
	// retainedSizes holds the counted size of each topic's retained
	// message (retainedSize), retainedBytes their sum, and pendingBytes
	// what publishes being stored have reserved past it, all under
	// retainMu: the byte bound is checked without a walk of mochi's index.
	retainedSizes map[string]int64
	retainedBytes int64
	pendingBytes  int64

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

// ErrClosed is returned by calls on a closed Gateway.
var ErrClosed = errors.New("mqtt gateway closed")

// Start opens the store, binds the listeners and serves until Close.
func Start(cfg Config, be Backend) (*Gateway, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxInflight <= 0 {
		cfg.MaxInflight = defaultMaxInflight
	}
	if cfg.MaxClients <= 0 {
		cfg.MaxClients = defaultMaxClients
	}
	if cfg.MaxRetained <= 0 {
		cfg.MaxRetained = defaultMaxRetained
	}
	if cfg.MaxRetainedBytes <= 0 {
		cfg.MaxRetainedBytes = defaultMaxRetainedBytes
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = defaultMaxSessions
	}
	if cfg.MaxSubscriptions <= 0 {
		cfg.MaxSubscriptions = defaultMaxSubscriptions
	}
	if cfg.MaxSessionExpiry <= 0 {
		cfg.MaxSessionExpiry = defaultMaxSessionExpiry
	}
	if cfg.SysInterval <= 0 {
		cfg.SysInterval = defaultSysInterval
	}
	st, err := openStore(filepath.Join(cfg.DataDir, "mqtt.db"))
	if err != nil {
		return nil, err
	}
	g := &Gateway{cfg: cfg, log: cfg.Logger.With(slog.String("component", "mqtt")), be: be, store: st, metrics: newMetrics(), wills: newWills(), qos2: newQoS2Markers(), resends: newResends(), shares: newShares(), retainPending: map[string]struct{}{}, retainedSizes: map[string]int64{}}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	g.retainer = newRetainer(g)
	g.connecting.log.Every = connectLogEvery
	g.acceptLog.Every = acceptLogEvery
	caps := mqtt.NewDefaultServerCapabilities()
	// Retained messages and in-flight deliveries expire by their own
	// expiry only; mochi's default would drop them after a day.
	caps.MaximumMessageExpiryInterval = 0
	maxBody := cfg.Limits.MaxBody
	if maxBody <= 0 {
		maxBody = message.DefaultLimits().MaxBody
	}
	caps.MaximumSessionExpiryInterval = uint32(min(max(cfg.MaxSessionExpiry/time.Second, 1), math.MaxUint32))
	caps.MaximumPacketSize = uint32(maxBody + maxPacketOverhead)
	caps.ReceiveMaximum = g.receiveMaximum()
	// A client's topic aliases are topics mochi keeps for its connection,
	// each up to 64 KiB; its default, 65,535 of them, would let one
	// connection hold gigabytes. Mosquitto's default is the same 10.
	caps.TopicAliasMaximum = maxTopicAliases
	if n := clientWritesPending.Load(); n > 0 {
		caps.MaximumClientWritesPending = n // a test's
	}
	// mochi publishes the $SYS topics itself, retained, to the filters
	// in its own index: a $SYS filter is the one kind that is no Petrel
	// subscription (see isSys).
	g.srv = mqtt.New(&mqtt.Options{
		Capabilities:           caps,
		Logger:                 g.log,
		InlineClient:           false,
		SysTopicResendInterval: int64(max(cfg.SysInterval/time.Second, 1)),
	})
	if cfg.Version != "" {
		g.srv.Info.Version = cfg.Version
	}
	g.hook = &hook{g: g, conns: map[*mqtt.Client]*connState{}}
	if err := g.srv.AddHook(g.hook, nil); err != nil {
		_ = st.close()
		return nil, err
	}
	// The listeners are bound here, so that Start reports a port in use,
	// and accept through acceptretry: mochi's own TCP listener stops for
	// good at the first Accept error, EMFILE included.
	tcpLn, err := g.listen(cfg.Listen, listenerTCP)
	if err != nil {
		_ = st.close()
		return nil, fmt.Errorf("mqtt listen %s: %w", cfg.Listen, err)
	}
	var ln net.Listener = tcpLn
	if cfg.TLS != nil {
		ln = tls.NewListener(ln, cfg.TLS)
	}
	g.tcp = listeners.NewNet("mqtt", ln)
	if err := g.srv.AddListener(corked{g.tcp, g, tcpLn}); err != nil {
		_ = tcpLn.Close()
		_ = st.close()
		return nil, fmt.Errorf("mqtt listen %s: %w", cfg.Listen, err)
	}
	if cfg.WebSocket != "" {
		wsLn, err := g.listen(cfg.WebSocket, listenerWebSocket)
		if err == nil {
			g.ws = newWSListener("mqtt-ws", wsLn, cfg.TLS, g)
			err = g.srv.AddListener(corked{g.ws, g, wsLn})
		}
		if err != nil {
			if wsLn != nil {
				_ = wsLn.Close()
			}
			g.tcp.Close(func(string) {})
			_ = st.close()
			return nil, fmt.Errorf("mqtt websocket listen %s: %w", cfg.WebSocket, err)
		}
	}
	if err := g.loadWills(); err != nil {
		g.closeServer()
		_ = st.close()
		return nil, fmt.Errorf("mqtt wills: %w", err)
	}
	if err := g.srv.Serve(); err != nil {
		g.closeServer()
		_ = st.close()
		return nil, fmt.Errorf("mqtt serve: %w", err)
	}
	g.loadShares(g.srv.Clients.GetAll())
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		g.retainer.run()
	}()
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		g.willLoop()
	}()
	g.log.Info("mqtt listening", slog.String("listen", g.Addr()), slog.String("websocket", g.WebSocketAddr()))
	return g, nil
}

// receiveMaximum is the Receive Maximum the node announces: the QoS 1
// and 2 publishes a client may have unacknowledged.
func (g *Gateway) receiveMaximum() uint16 { return uint16(min(g.cfg.MaxInflight*10, 65535)) }

// Addr returns the MQTT listener's address, with the port it took.
func (g *Gateway) Addr() string { return g.tcp.Address() }

// WebSocketAddr returns the WebSocket listener's address, "" without one.
func (g *Gateway) WebSocketAddr() string {
	if g.ws == nil {
		return ""
	}
	return g.ws.Address()
}

// Close stops the listeners, disconnects the clients, stops every
// delivery and closes the store. In-flight deliveries go back to their
// subscriptions.
func (g *Gateway) Close() error {
	var err error
	g.once.Do(func() {
		g.hook.willsAtClose()
		g.closeServer()
		// What the clients published, and their wills, is kept before
		// the node is told to stop.
		g.retainer.close()
		g.cancel()
		g.hook.stopAll()
		g.wg.Wait()
		err = g.store.close()
	})
	return err
}

// closeServer disconnects every client, waits for their goroutines and
// stops the server.
//
// mochi's Close finds each listener's clients with Clients.GetByListener,
// which read-locks the clients twice: a client whose disconnect write-locks
// them in between deadlocks the broker (mochi-mqtt/server#488). So the
// listeners are closed first, with a closer that reads the clients once;
// each listener disconnects its clients only on its first close, so
// mochi's Close then finds nothing left to disconnect and stops the rest.
func (g *Gateway) closeServer() {
	g.closing.Store(true)
	g.srv.Listeners.CloseAll(g.disconnectListener)
	_ = g.srv.Close()
}

// disconnectListener disconnects the clients of one listener, as mochi's
// closeListenerClients does, from one copy of the clients.
func (g *Gateway) disconnectListener(listener string) {
	for _, cl := range g.srv.Clients.GetAll() {
		if cl.Net.Listener == listener && !cl.Closed() {
			_ = g.srv.DisconnectClient(cl, packets.ErrServerShuttingDown)
		}
	}
}
