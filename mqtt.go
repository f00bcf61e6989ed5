package petrel

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/petrelmq/petrel/address"
	"github.com/petrelmq/petrel/internal/logkey"
	"github.com/petrelmq/petrel/internal/mqttgw"
	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/queue"
	"github.com/petrelmq/petrel/receiver"
)

// MQTTConfig is the node's MQTT listener (see the README's MQTT section):
// MQTT 3.1.1 and 5 clients publish to and subscribe to the node's topics.
type MQTTConfig struct {
	// Listen is the host:port of the MQTT listener, such as
	// "0.0.0.0:1883"; port 0 takes a free one (Node.MQTTAddr). Empty: no
	// MQTT listener.
	Listen string
	// TLS makes the MQTT listeners speak TLS with the node's TLS section
	// (its certificate, and with client_auth require_and_verify, client
	// certificates whose Common Name is the identity).
	TLS bool
	// WebSocket is the host:port of an MQTT over WebSocket listener;
	// empty for none.
	WebSocket string
	// MaxInflight bounds the QoS 1 and 2 deliveries awaiting each
	// connection's acknowledgement (default 100).
	MaxInflight int
	// MaxClients bounds the MQTT clients connected at once (default
	// 1024); one past it is refused at CONNACK.
	MaxClients int
	// MaxRetained bounds the topics holding a retained MQTT message
	// (default 10000); a retained publish to a new topic past it is
	// refused, and replacing one is always taken.
	MaxRetained int
	// MaxRetainedBytes bounds the bytes of the retained MQTT messages,
	// payloads and topics (default 64 MiB), which the gateway keeps in
	// memory; a retained publish that would grow them past it is refused,
	// as one past MaxRetained is.
	MaxRetainedBytes int64
	// MaxSessions bounds the persistent MQTT sessions kept, connected or
	// not (default 10000); a connection that would add one past it is
	// refused at CONNACK.
	MaxSessions int
	// MaxSubscriptions bounds the topic filters one MQTT client holds
	// (default 100): a SUBSCRIBE past it is answered, for each new filter,
	// with quota exceeded (MQTT 5 0x97, 3.1.1 0x80). Each filter is a
	// Petrel subscription with a delivery goroutine; the node-wide
	// max_auto_queues bounds them all, and this keeps one client from
	// taking that budget.
	MaxSubscriptions int
	// MaxSessionExpiry caps the time a persistent MQTT session outlives
	// its connection (default 7 days; whole seconds): an MQTT 5 client
	// asking more is told the cap in CONNACK, and an MQTT 3.1.1 session
	// (clean session false) ends that long after its client left.
	MaxSessionExpiry time.Duration
	// SysInterval is how often the broker's $SYS topics (clients,
	// messages, bytes, uptime, as Mosquitto publishes them) are published
	// (default 10s; whole seconds). A client may subscribe to them if its
	// identity may subscribe to every topic ("#"): with no access rules,
	// every client.
	SysInterval time.Duration
}

// MQTTStats are the MQTT listener's figures, in Status.
type MQTTStats = mqttgw.Stats

// mqttPolicy is the queue policy of MQTT subscriptions. An MQTT delivery
// is settled by the client's PUBACK or PUBCOMP, or given back when its
// connection ends, so the lease is long; MQTT has no nack, and a message
// given back when a client went away is no poison: nothing is dead-lettered.
var mqttPolicy = QueuePolicy{
	MaxDeliveries:      1 << 30,
	LeaseTimeout:       24 * time.Hour,
	RedeliveryDelay:    time.Millisecond,
	MaxRedeliveryDelay: time.Millisecond,
}

// startMQTT starts the MQTT listener, when one is configured.
func (n *Node) startMQTT() error {
	c := n.cfg.MQTT
	if c.Listen == "" {
		return nil
	}
	gc := mqttgw.Config{
		Listen: c.Listen, WebSocket: c.WebSocket, DataDir: n.cfg.DataDir,
		MaxInflight: c.MaxInflight, MaxClients: c.MaxClients, MaxRetained: c.MaxRetained, MaxRetainedBytes: c.MaxRetainedBytes, MaxSessions: c.MaxSessions, MaxSubscriptions: c.MaxSubscriptions, MaxSessionExpiry: c.MaxSessionExpiry, SysInterval: c.SysInterval, Version: "petrel " + moduleVersion(),
		Limits: n.cfg.Limits, Logger: n.cfg.Logger,
	}
	if c.TLS {
		tc, err := n.cfg.TLS.ServerConfig()
		if err != nil {
			return fmt.Errorf("mqtt.tls: %w", err)
		}
		gc.TLS = tc
	}
	g, err := mqttgw.Start(gc, mqttBackend{n})
	if err != nil {
		return err
	}
	n.mqtt = g
	n.retainer.Store(g)
	n.registry.MustRegister(g.Collector())
	return nil
}

func (n *Node) stopMQTT() {
	n.retainer.Store(nil)
	if n.mqtt != nil {
		if err := n.mqtt.Close(); err != nil {
			n.log.Warn("mqtt close", "error", err)
		}
	}
}

// MQTTAddr returns the address the MQTT listener is bound to, with the
// port it took; "" when it is off.
func (n *Node) MQTTAddr() string {
	if n.mqtt == nil {
		return ""
	}
	return n.mqtt.Addr()
}

// unready says why the node no longer serves all it started: an MQTT
// listener that stopped accepting connections (its socket failed past
// retrying); nil when all serve.
func (n *Node) unready() error {
	if n.srv != nil {
		if err := n.srv.Err(); err != nil {
			return err
		}
	}
	if n.mqtt == nil {
		return nil
	}
	return n.mqtt.Err()
}

func (n *Node) mqttStats() *MQTTStats {
	if n.mqtt == nil {
		return nil
	}
	s := n.mqtt.Stats()
	return &s
}

// mqttBackend is the node as the MQTT gateway sees it.
type mqttBackend struct{ n *Node }

var errMQTTAuth = errors.New("mqtt authentication failed")

// Authenticate: a verified client certificate's Common Name, when there
// is one; else, with peers listed, the username's entry and its secret as
// the password; else, with a shared secret, the secret as the password
// and the username as a claimed identity; else anyone, as its username.
// The proof notes which secret the password matched (secretProof), for
// Admitted.
func (b mqttBackend) Authenticate(username string, password []byte, certCN string) (string, string, error) {
	n := b.n
	peers := n.idents != nil && n.idents.listed()
	if certCN != "" {
		if username != "" && username != certCN {
			return "", "", fmt.Errorf("%w: username %q is not the certificate's name %q", errMQTTAuth, username, certCN)
		}
		if peers {
			if _, ok := n.idents.credential(certCN); !ok {
				return "", "", fmt.Errorf("%w: %q is not listed under peers", errMQTTAuth, certCN)
			}
		}
		return certCN, "", nil
	}
	if n.cfg.MQTT.TLS && n.cfg.TLS.ClientAuth == ClientAuthRequireAndVerify {
		return "", "", fmt.Errorf("%w: a verified client certificate is required", errMQTTAuth)
	}
	if peers {
		cred, ok := n.idents.credential(username)
		if !ok || cred.Secret == nil || subtle.ConstantTimeCompare(cred.Secret, password) != 1 {
			return "", "", fmt.Errorf("%w: unknown username %q or wrong password", errMQTTAuth, username)
		}
		return username, secretProof(proofPeer, cred.Secret), nil
	}
	secret := n.sharedSecret()
	if secret != "" && subtle.ConstantTimeCompare([]byte(secret), password) != 1 {
		return "", "", fmt.Errorf("%w: wrong password (the node's shared secret)", errMQTTAuth)
	}
	return username, secretProof(proofShared, []byte(secret)), nil
}

// The kinds of an MQTT connection's proof (mqttgw.Conn.Proof): the
// secret of its identity's peers entry, or the shared secret. A
// certificate's proof is empty: no secret change revokes it.
const (
	proofPeer   = "peer:"
	proofShared = "shared:"
)

// secretProof notes that a client proved secret, as kind: a digest, so
// that the secret itself is not kept with every connection; kind alone
// for no secret.
func secretProof(kind string, secret []byte) string {
	if len(secret) == 0 {
		return kind
	}
	sum := sha256.Sum256(secret)
	return kind + hex.EncodeToString(sum[:])
}

func (b mqttBackend) info(c mqttgw.Conn) ConnInfo {
	return ConnInfo{Identity: c.Identity, Kind: PeerKindClient, Remote: c.Remote, Path: PathMQTT}
}

func (b mqttBackend) Connect(ctx context.Context, c mqttgw.Conn) error {
	return b.n.icpt.connect(ctx, b.info(c))
}

func (b mqttBackend) Disconnect(c mqttgw.Conn) {
	if b.n.icpt.on() {
		b.n.icpt.disconnect(b.info(c))
	}
}

// Admitted: with peers listed, an identity removed from them no longer
// connects (Authenticate), and one connected is disconnected at the
// reload that removed it, or that changed the secret it proved with its
// password (a certificate proves no secret). Without peers, every
// identity is a claim that nothing revokes, but a connection that proved
// the shared secret is disconnected when it changes; listing the first
// peer takes a restart.
func (b mqttBackend) Admitted(c mqttgw.Conn) error {
	n := b.n
	if n.idents == nil {
		return nil
	}
	if !n.idents.listed() {
		if strings.HasPrefix(c.Proof, proofShared) && c.Proof != secretProof(proofShared, n.idents.sharedSecret()) {
			return errors.New("the node's shared secret changed; connect again with the new one")
		}
		return nil
	}
	cred, ok := n.idents.credential(c.Identity)
	if !ok {
		return fmt.Errorf("identity %q was removed from peers", c.Identity)
	}
	if strings.HasPrefix(c.Proof, proofPeer) && c.Proof != secretProof(proofPeer, cred.Secret) {
		return fmt.Errorf("the secret of identity %q changed; connect again with the new one", c.Identity)
	}
	return nil
}

func (b mqttBackend) AuthorizeSubscribe(c mqttgw.Conn, pattern string) error {
	p, err := address.ParsePattern(pattern)
	if err != nil {
		return err
	}
	if isInternal(pattern) {
		return fmt.Errorf("subscribe to %q: %w", pattern, errInternalPattern)
	}
	if !b.n.topics.inSpace(p) {
		return fmt.Errorf("subscribe to %q: %w", pattern, ErrNoTopicSpace)
	}
	return b.n.authorizeSubscribe(c.Identity, pattern)
}

// AuthorizeSys lets c read the $SYS topics if it may subscribe to every
// topic: they describe the whole broker.
func (b mqttBackend) AuthorizeSys(c mqttgw.Conn) error {
	return b.n.authorizeSubscribe(c.Identity, "#")
}

func (b mqttBackend) NewMessage(topic string) *message.Message {
	return b.n.stamper().create(topic, message.KindData)
}

// Publish: the interceptors, then the publish rule, then the store, as a
// remote client's publish.
func (b mqttBackend) Publish(ctx context.Context, m *message.Message, c mqttgw.Conn, mark string) (mqttgw.Commit, error) {
	n := b.n
	topic := n.localTopic(m.Destination)
	if topic == "" {
		return nil, &mqttgw.Refusal{Code: mqttgw.CodeTopicNameBad, Reason: n.notTopic(m.Destination)}
	}
	if err := n.icpt.publish(ctx, m, b.info(c)); err != nil {
		return nil, &mqttgw.Refusal{Code: mqttgw.CodeImplementation, Reason: err.Error()}
	}
	if err := n.Authorize(c.Identity, ActionPublish, topic); err != nil {
		return nil, &mqttgw.Refusal{Code: mqttgw.CodeNotAuthorized, Reason: err.Error()}
	}
	// The gateway validated m before the interceptors: what fails now, an
	// interceptor's change made invalid.
	if err := m.Validate(n.cfg.Limits); err != nil {
		code := mqttgw.CodeImplementation
		if errors.Is(err, message.ErrBodyTooLarge) {
			code = mqttgw.CodePacketTooLarge
		}
		return nil, &mqttgw.Refusal{Code: code, Reason: receiver.ReasonIntercepted + err.Error()}
	}
	if mark != "" {
		mark = mqttMarkPrefix + mark
	}
	done, err := n.publish(m, topic, mark)
	if err != nil {
		return nil, storeRefusal(err)
	}
	return mqttCommit{done}, nil
}

// notTopic says why dest, which localTopic did not take, is no topic of
// this node: in the words a Petrel sender to it is told where there are
// any (a reserved name; a name inside a space that is no topic name),
// so that an MQTT client is not told "in no topic space" of "_petrel.x"
// when a space "#" matches it word by word.
func (n *Node) notTopic(dest string) string {
	name, _, err := message.ParseDestination(dest)
	if err != nil {
		return err.Error()
	}
	if err := reservedName(name); err != nil {
		return err.Error()
	}
	if err := n.topics.misnamed(name); err != nil {
		return err.Error()
	}
	return fmt.Sprintf("topic %q is in no topic space of node %s (declare one under topics)", dest, n.cfg.Name)
}

// mqttMarkPrefix keeps the gateway's marks, in the store's meta table,
// apart from the node's own keys.
const mqttMarkPrefix = "mqtt/"

func (b mqttBackend) Marks(ctx context.Context, prefix string) ([]string, error) {
	keys, _, err := b.n.store.MetaPrefix(ctx, mqttMarkPrefix+prefix)
	for i, k := range keys {
		keys[i] = strings.TrimPrefix(k, mqttMarkPrefix)
	}
	return keys, err
}

func (b mqttBackend) Mark(key string) (mqttgw.Commit, error) {
	op, err := b.n.store.SubmitMeta(mqttMarkPrefix+key, []byte{})
	if err != nil {
		return nil, storeRefusal(err)
	}
	return mqttCommit{op}, nil
}

// Unmark submits every removal before it waits, so that a session's
// markers go in one commit rather than one commit each.
func (b mqttBackend) Unmark(ctx context.Context, keys ...string) error {
	ops := make([]*queue.Op, 0, len(keys))
	var err error
	for _, k := range keys {
		op, serr := b.n.store.SubmitMeta(mqttMarkPrefix+k, nil)
		if serr != nil {
			err = serr
			break
		}
		ops = append(ops, op)
	}
	for _, op := range ops {
		err = errors.Join(err, op.Wait(ctx))
	}
	return err
}

// mqttCommit is a publish's completion, with a full store told as quota
// exceeded.
type mqttCommit struct{ c completion }

func (c mqttCommit) Done() <-chan struct{} { return c.c.Done() }
func (c mqttCommit) Err() error            { return storeRefusal(c.c.Err()) }

// storeRefusal tells a full store to the MQTT client as quota exceeded.
func storeRefusal(err error) error {
	if errors.Is(err, ErrStoreFull) {
		return &mqttgw.Refusal{Code: mqttgw.CodeQuotaExceeded, Reason: err.Error()}
	}
	return err
}

func (b mqttBackend) Subscribe(ctx context.Context, pattern, name string, durable bool, c mqttgw.Conn) (mqttgw.Subscription, error) {
	n := b.n
	// A session's subscriptions are its identity's, as the session is:
	// another identity may not join them. A shared group's is the
	// gateway's, which lets any member the access rules admit join it;
	// an anonymous client (no identity, no peers) holds nothing of its
	// own, as its session is held by nobody.
	by := subscriber{identity: c.Identity, client: c.Identity != ""}
	if strings.HasPrefix(name, mqttgw.SharePrefix) {
		by = subscriber{}
	}
	con, err := n.subscribe(ctx, pattern, SubscribeOptions{Name: name, Durable: durable, Policy: mqttPolicy}, by)
	if errors.Is(err, ErrTooManyQueues) {
		// A subscription is a queue, and the node holds max_auto_queues:
		// the client is told quota exceeded, as past max_subscriptions.
		return nil, &mqttgw.Refusal{Code: mqttgw.CodeQuotaExceeded, Reason: err.Error()}
	}
	if err != nil {
		return nil, err
	}
	if sc, ok := con.b.(*subConsumer); ok {
		// The gateway settles what a client has in flight after its
		// unsubscribe closed the consumer (MQTT-3.10.4-3), and gives
		// back itself, with a nack, what a closed connection had.
		sc.keep = true
	}
	ic, err := n.icpt.consumerFor(con, b.info(c))
	if err != nil {
		con.Close()
		return nil, err
	}
	return mqttSubscription{ic}, nil
}

func (b mqttBackend) Unsubscribe(ctx context.Context, name string) error {
	err := b.n.Unsubscribe(ctx, name)
	if errors.Is(err, ErrSubscription) {
		return nil // none: a session that never subscribed durably
	}
	return err
}

func (b mqttBackend) Subscriptions() []string {
	subs := b.n.Subscriptions()
	names := make([]string, len(subs))
	for i, s := range subs {
		names[i] = s.Name
	}
	return names
}

type mqttSubscription struct{ c *Consumer }

func (s mqttSubscription) Receive(ctx context.Context) (mqttgw.Delivery, error) {
	d, err := s.c.Receive(ctx)
	if err != nil {
		return nil, err
	}
	return mqttDelivery{d}, nil
}

func (s mqttSubscription) Poll() (mqttgw.Delivery, error) {
	d, err := s.c.Poll()
	if err != nil {
		return nil, err
	}
	return mqttDelivery{d}, nil
}

func (s mqttSubscription) Close() { _ = s.c.Close() }

type mqttDelivery struct{ d *Delivery }

func (d mqttDelivery) Message() *message.Message { return d.d.Message }
func (d mqttDelivery) Attempt() int              { return d.d.Attempt }
func (d mqttDelivery) Ack() error                { return d.d.Ack() }
func (d mqttDelivery) Nack(reason string) error  { return d.d.Nack(reason) }

// retainArrived keeps, at this site's MQTT front door, a retained
// publish that arrived from another site, so that a subscriber that comes
// here later gets it as its topic's retained message: the live publish
// crosses sites by interest forwarding, and each site keeps what it saw
// pass. A failure loses the publish nothing: it is only logged.
func (n *Node) retainArrived(m *message.Message) {
	g := n.retainer.Load()
	if g == nil {
		return
	}
	if err := g.RetainArrived(m); err != nil {
		if held, ok := n.retainLog.Allow(""); ok {
			n.log.Warn("mqtt retained message from another site not kept", slog.String("topic", m.Destination),
				slog.Int64("suppressed", held), slog.Any(logkey.Error, err))
		}
	}
}

// sharedSecret is the shared secret in force.
func (n *Node) sharedSecret() string {
	n.reconfMu.Lock()
	defer n.reconfMu.Unlock()
	return n.current.Secret
}

// listed reports whether any identity is listed under peers.
func (ids *identities) listed() bool {
	ids.mu.Lock()
	defer ids.mu.Unlock()
	return len(ids.peers) > 0
}

// validateMQTT checks the mqtt section.
func (c Config) validateMQTT() error {
	m := c.MQTT
	switch {
	case m.Listen == "" && (m.TLS || m.WebSocket != ""):
		return cfgErr("mqtt.listen", "mqtt.tls and mqtt.websocket need mqtt.listen: set it, such as 0.0.0.0:1883", nil)
	case m.TLS && !c.TLS.Listening():
		return cfgErr("mqtt.tls", "the MQTT listener takes the node's certificate: set tls.cert and tls.key", nil)
	case m.MaxInflight < 0 || m.MaxInflight > 65535:
		return cfgErr("mqtt.max_inflight", fmt.Sprintf("%d is out of range (1 to 65535, 0 for the default 100)", m.MaxInflight), nil)
	case m.MaxClients < 0:
		return cfgErr("mqtt.max_clients", fmt.Sprintf("%d is negative (0 for the default 1024)", m.MaxClients), nil)
	case m.MaxRetained < 0:
		return cfgErr("mqtt.max_retained", fmt.Sprintf("%d is negative (0 for the default 10000)", m.MaxRetained), nil)
	case m.MaxRetainedBytes < 0:
		return cfgErr("mqtt.max_retained_bytes", fmt.Sprintf("%d is negative (0 for the default 64 MiB)", m.MaxRetainedBytes), nil)
	case m.MaxSessions < 0:
		return cfgErr("mqtt.max_sessions", fmt.Sprintf("%d is negative (0 for the default 10000)", m.MaxSessions), nil)
	case m.MaxSubscriptions < 0:
		return cfgErr("mqtt.max_subscriptions", fmt.Sprintf("%d is negative (0 for the default 100)", m.MaxSubscriptions), nil)
	case m.MaxSessionExpiry < 0 || m.MaxSessionExpiry > math.MaxUint32*time.Second:
		return cfgErr("mqtt.max_session_expiry", fmt.Sprintf("%s is out of range (1s to 2^32-1 s, 0 for the default 7 days)", m.MaxSessionExpiry), nil)
	case m.SysInterval < 0 || m.SysInterval > 24*time.Hour:
		return cfgErr("mqtt.sys_interval", fmt.Sprintf("%s is out of range (1s to 24h, 0 for the default 10s)", m.SysInterval), nil)
	}
	return nil
}
