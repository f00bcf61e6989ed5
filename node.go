package petrel

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/petrelmq/petrel/internal/durable"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/dig"
	"go.uber.org/fx"

	"github.com/petrelmq/petrel/address"
	"github.com/petrelmq/petrel/filetransfer"
	"github.com/petrelmq/petrel/internal/mqttgw"
	"github.com/petrelmq/petrel/internal/ratelog"
	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/queue"
	"github.com/petrelmq/petrel/receiver"
	"github.com/petrelmq/petrel/sender"
)

// Node is one running Petrel node. Its methods are safe for concurrent use.
type Node struct {
	// cfg is the configuration the node opened with, defaults applied.
	// Reconfigure does not change it: what a reload changes is in current
	// and in the fields that hold it live (routes, noAutoCreate, access,
	// idents, addresses, outboxes, discovery), so once the node started,
	// a setting that a reload may change is read from those, not from cfg.
	cfg   Config
	log   *slog.Logger
	store *queue.Store
	ids   *message.IDGen
	id    message.NodeID
	app   *fx.App

	dir *address.Directory
	// discovery's listener and announcer; nil when it is off. reconfMu
	// guards them: a reload restarts discovery.
	discoveryListener *address.Listener
	announcer         *address.Announcer
	routes            atomic.Pointer[address.Routes]
	// hops keeps nextHop's answers while routes and dir stay the same.
	hops atomic.Pointer[hopTable]
	// noAutoCreate mirrors cfg.NoAutoCreate, which a reload may change.
	noAutoCreate atomic.Bool
	// autoMu serialises the creation of undeclared queues, so that
	// MaxAutoQueues holds; autoRefused counts the creations it refused.
	autoMu      sync.Mutex
	autoRefused atomic.Int64
	// loops counts the messages refused as going round a routing loop;
	// loopLog holds back repeated lines of them, per peer.
	loops   atomic.Int64
	loopLog ratelog.Limiter
	mgr     *sender.Manager
	srv     *receiver.Server
	// files is cfg.Files with its defaults; spool holds files being
	// received and those a relay holds.
	files FilesConfig
	spool *filetransfer.Spool
	// checksums hands the SHA-256 of a file that Send hashes while its
	// transfer already runs to the sender moving it (see Producer.Send).
	checksums *sender.Checksums
	// hashHook, set by tests only, runs before Send hashes a file whose
	// checksum follows, with its message already stored.
	hashHook func(m *message.Message)
	// outboxHook, set by tests only, runs when an outbox's file is about
	// to be sent: found complete, not yet looked at or read.
	outboxHook atomic.Pointer[func(path string)]
	outboxes   outboxes
	// heldMu orders the marks of relayed files that failed for good with
	// their sweep and with a send again (see keepFailedHeld).
	heldMu   sync.Mutex
	outcomes fileOutcomes
	// janitorStop ends the spool janitor; janitorDone closes when it did.
	janitorStop, janitorDone chan struct{}
	// access holds the access rules in force and counts denials.
	access accessControl
	// idents holds who may connect, the neighbours' secrets and the ids
	// bound to identities.
	idents *identities
	// icpt is the chain of interceptors; empty when none are registered.
	icpt *interceptors

	started   time.Time
	closeOnce sync.Once
	// opening holds the send queues being made for puts that do not wait
	// (see sendqueue_open.go).
	opening openingSends

	// reconfMu serializes Reconfigure, and the starts and stops of
	// discovery with it (Module's hook, and discoveryStats reading it).
	// current, which it guards, is the configuration in force: the last
	// one applied, with the settings only a restart applies kept as the
	// node opened with them, so that the next reload still finds them
	// pending.
	reconfMu   sync.Mutex
	current    Config
	confStatus ConfigStatus // guarded by mu
	closeErr   error
	// ha is the lock of a node of a live/backup pair, nil otherwise;
	// dropped after the store closes.
	ha *haHold
	// admin serves the admin endpoints, on the unix socket and on
	// Config.Admin.Listen; it reports the node ready.
	admin    *adminServer
	registry *prometheus.Registry
	// browses bounds the browses of queues in progress (browse.go).
	browses *browseLimit

	// topics holds the topic spaces and subscriptions; the inbox pump,
	// which inboxStop ends and inboxDone reports ended, fans out the
	// topics' messages from links and clients.
	topics    *topics
	inboxStop context.CancelFunc
	inboxDone chan struct{}
	// mqtt is the MQTT listener; nil when it is off.
	mqtt *mqttgw.Gateway
	// retainer is mqtt for the inbox pump, which starts before it and
	// keeps the retained publishes that arrive from other sites
	// (retainArrived): set once the listener runs, cleared as it stops.
	retainer atomic.Pointer[mqttgw.Gateway]
	// retainLog holds back repeated lines of retained publishes from
	// other sites not kept: a peer may send them by the thousand.
	retainLog ratelog.Limiter

	// mu guards addresses, listeners, closed and confStatus.
	mu        sync.Mutex
	addresses map[string]AddressConfig
	listeners map[*Listener]struct{}
	closed    bool
}

const (
	metaIDFloor = "id_floor"
)

// Module assembles a Node from a Config: the store, the node, its senders
// and its receiver, then discovery and the admin HTTP endpoint. Start runs
// them in that order; stop runs backwards, so the admin endpoint reports
// the node not ready and discovery stops announcing it before the
// receiver stops accepting, and the store closes last.
var Module = fx.Module("petrel",
	fx.Provide(newCommitMetrics, loadTLS, storeConfig, newNode, linkConfigs, newManager, newRouter, newInterceptors),
	queue.Module,
	sender.Module,
	receiver.Module,
	fx.Invoke(func(lc fx.Lifecycle, n *Node, s *receiver.Server) {
		n.srv = s
		// Discovery announces the listen address, so it starts after the
		// receiver, and stops before it.
		lc.Append(fx.Hook{
			OnStart: func(context.Context) error {
				n.reconfMu.Lock()
				defer n.reconfMu.Unlock()
				return n.startDiscovery(n.cfg.Discovery, n.cfg.Secret)
			},
			OnStop: func(context.Context) error {
				n.reconfMu.Lock()
				defer n.reconfMu.Unlock()
				n.stopDiscovery()
				return nil
			},
		})
		// The admin endpoint reports the node ready, so it starts last and
		// stops first.
		lc.Append(fx.Hook{OnStart: n.startAdminHTTP, OnStop: n.stopAdminHTTP})
	}),
)

func (c Config) withDefaults() Config {
	if c.Name == "" {
		c.Name = defaultName()
	}
	if c.DataDir == "" {
		c.DataDir = "petrel-data"
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func defaultName() string {
	h, err := os.Hostname()
	if err != nil {
		return "petrel"
	}
	h = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return '-'
	}, h)
	if message.ValidName(h) != nil {
		return "petrel"
	}
	return h
}

// storeConfig derives the store's configuration and makes the data
// directory, which the store's file lives in.
//
// It takes the node's TLS so that its files are read, and any problem with
// them reported, before the store opens.
func storeConfig(cfg Config, cm *commitMetrics, _ nodeTLS, ha haIn) (queue.Config, error) {
	cfg = cfg.withDefaults()
	if err := checkHA(cfg, ha); err != nil {
		return queue.Config{}, err
	}
	// Validate here, before the store opens: fx does not stop what was
	// constructed when a later constructor fails.
	if err := cfg.Validate(); err != nil {
		return queue.Config{}, err
	}
	if err := privateDir(cfg.DataDir); err != nil {
		return queue.Config{}, err
	}
	sc := cfg.Store
	if sc.Path == "" {
		sc.Path = filepath.Join(cfg.DataDir, "petrel.db")
	}
	if sc.Logger == nil {
		sc.Logger = cfg.Logger
	}
	sc.OnCommit = cm.hook(sc.OnCommit)
	return sc, nil
}

// privateDir makes the data directory dir, or takes the one there, and
// sets its mode to 0700 at every start, not only when it is made: it holds
// the database, the identity, the spool and the admin socket, which no
// other user may read or reach. A directory that cannot be changed (not
// the node's user's own) is accepted if it is already closed to others.
func privateDir(dir string) error {
	if err := durable.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("make data directory: %w", err)
	}
	err := os.Chmod(dir, 0o700)
	if err == nil {
		return nil
	}
	if fi, serr := os.Stat(dir); serr == nil && fi.Mode().Perm()&0o077 == 0 {
		return nil
	}
	return fmt.Errorf("data directory %s is open to other users, and its mode cannot be set to 0700 (%w): "+
		"make the node's user its owner, or run chmod 700 %s", dir, err, dir)
}

// Open starts a node: it opens (or creates) its data directory and store,
// declares its addresses, and returns once it is ready. Close stops it.
func Open(ctx context.Context, cfg Config) (*Node, error) {
	return OpenReloaded(ctx, cfg, nil)
}

// OpenReloaded is Open for a Config read from a file that may be edited
// while a backup waits for the lock, possibly for days: once the lock is
// held, and before anything else is opened, reload is called with cfg and
// the node opens with the Config it returns, so that the node that takes
// over runs the file as it is then, not as it was when its process
// started. The Config returned must keep cfg's data directory and HA
// settings, which the lock was taken for. A nil reload is Open.
func OpenReloaded(ctx context.Context, cfg Config, reload func(Config) (Config, error)) (*Node, error) {
	return openHA(ctx, cfg, reload, func(cfg Config, hold *haHold) (*Node, error) {
		var n *Node
		opts := []fx.Option{fx.Supply(cfg), Module, fx.Populate(&n), fx.NopLogger}
		if hold != nil {
			opts = append(opts, fx.Supply(hold))
		}
		app := fx.New(opts...)
		if err := app.Err(); err != nil {
			return nil, fmt.Errorf("open node: %w", unwrapFx(err))
		}
		if err := app.Start(ctx); err != nil {
			return nil, fmt.Errorf("open node: %w", unwrapFx(err))
		}
		n.app = app
		return n, nil
	})
}

// unwrapFx keeps the error the user can act on, not fx's wiring trace.
func unwrapFx(err error) error {
	if root := dig.RootCause(err); root != nil {
		return root
	}
	return err
}

func newNode(lc fx.Lifecycle, cfg Config, store *queue.Store, cm *commitMetrics, icpt *interceptors, ha haIn) (*Node, error) {
	cfg = cfg.withDefaults()
	id, err := loadIdentity(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	n := &Node{
		id:        id,
		cfg:       cfg,
		log:       cfg.Logger.With(slog.String("component", "node"), slog.String("node", cfg.Name)),
		store:     store,
		addresses: map[string]AddressConfig{},
		listeners: map[*Listener]struct{}{},
		icpt:      icpt,
		ha:        ha.Hold,
		checksums: sender.NewChecksums(),
	}
	n.checksums.Forgotten = n.forgetGivenUp
	for _, a := range cfg.Addresses {
		if a.Role == 0 {
			a.Role = address.RoleReceive
		}
		n.addresses[a.Name] = a
	}
	n.current = cfg
	if n.topics, err = newTopics(cfg.Topics); err != nil {
		return nil, err
	}
	n.files = cfg.Files.withDefaults(cfg.DataDir)
	if err := n.openSpool(); err != nil {
		return nil, err
	}
	if err := n.spool.SetQuota(n.spoolQuota()); err != nil {
		return nil, err
	}
	dir, routes := buildRouting(cfg)
	n.dir = dir
	n.routes.Store(routes)
	n.noAutoCreate.Store(cfg.NoAutoCreate)
	n.access.set(cfg.Access)
	n.registry = newRegistry(n, cm)
	n.browses = newBrowseLimit(n.registry)
	n.admin = newAdminServer(n, n.log, n.registry, cfg.Limits)
	n.registry.MustRegister(icpt.collectors()...)
	n.registry.MustRegister(topicCollector{n.topics})
	n.registry.MustRegister(haCollector{ha.Hold})
	lc.Append(fx.Hook{OnStart: n.start, OnStop: n.stop})
	return n, nil
}

// start runs once the store is started (the identity was loaded before,
// in newNode): the id generator, the receive queues with their policies,
// the senders of the send queues, the spool's janitor, the outboxes and
// the admin socket.
func (n *Node) start(ctx context.Context) error {
	if err := n.loadIDFloor(ctx); err != nil {
		return err
	}
	for _, a := range n.addresses {
		if a.Role != address.RoleReceive {
			continue
		}
		q, err := n.receiveQueue(ctx, a.Name)
		if err != nil {
			return err
		}
		q.SetPolicy(a.Queue)
	}
	if err := n.loadGivenUp(ctx); err != nil { // before a sender can pick such a file up
		return err
	}
	if err := n.startSenders(ctx); err != nil {
		return err
	}
	if err := n.loadSubscriptions(ctx); err != nil {
		return err
	}
	if err := n.loadInterest(ctx); err != nil {
		return err
	}
	if err := n.startInbox(ctx); err != nil {
		return err
	}
	if err := n.startMQTT(); err != nil {
		n.stopInbox()
		return err
	}
	n.dropAbandoned()
	n.dropFailedHeld()
	n.janitorStop, n.janitorDone = make(chan struct{}), make(chan struct{})
	go n.janitor(n.janitorStop, n.janitorDone)
	for _, c := range n.cfg.Outboxes {
		if err := n.startOutbox(c); err != nil {
			n.stopOutboxes()
			return err
		}
	}
	n.started = time.Now()
	if err := n.startAdmin(); err != nil {
		return err
	}
	n.log.Info("node started", slog.String("id", n.id.String()), slog.String("data_dir", n.cfg.DataDir))
	return nil
}

// loadIDFloor starts the id generator above every id issued before.
func (n *Node) loadIDFloor(ctx context.Context) error {
	floorRaw, err := n.store.Meta(ctx, metaIDFloor)
	if err != nil {
		return err
	}
	var floor uint64
	if len(floorRaw) == 8 {
		floor = binary.BigEndian.Uint64(floorRaw)
	}
	n.ids = message.NewIDGen(floor, 10*time.Second, n.reserveIDs, n.cfg.Store.Now)
	return nil
}

// reserveIDs persists the id high-water mark, so that ids stay unique after
// a restart even if the clock went backwards meanwhile.
func (n *Node) reserveIDs(upTo uint64) error {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], upTo)
	return n.store.SetMeta(context.Background(), metaIDFloor, b[:])
}

func (n *Node) stop(ctx context.Context) error {
	n.mu.Lock()
	n.closed = true
	ls := make([]*Listener, 0, len(n.listeners))
	for l := range n.listeners {
		ls = append(ls, l)
	}
	n.mu.Unlock()
	for _, l := range ls {
		l.Stop()
	}
	n.stopOutboxes()
	// MQTT clients publish to topics and take from subscriptions: they
	// go before the inbox and the store.
	n.stopMQTT()
	n.stopInbox()
	if n.janitorStop != nil {
		close(n.janitorStop)
		<-n.janitorDone
	}
	n.stopAdmin(ctx)
	n.log.Info("node stopping")
	return nil
}

// Close stops the node's listeners, commits what was submitted and closes
// the store. Messages in flight to consumers come back after the next Open.
// Calling it again returns the first call's result.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		if n.app == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		n.closeErr = n.app.Stop(ctx)
		n.closeOpeners() // the store is closed: their ops have finished
		// The lock goes only once the store is closed: a backup waiting
		// on it may open the store the moment it is released.
		if err := n.ha.release(); err != nil && n.closeErr == nil {
			n.closeErr = fmt.Errorf("release the ha lock: %w", err)
		}
	})
	return n.closeErr
}

// Sync returns once everything submitted to the store before it has
// committed, acks included. QueueStats read after it count them.
func (n *Node) Sync(ctx context.Context) error { return n.store.Sync(ctx) }

// DataDir returns the node's data directory.
func (n *Node) DataDir() string { return n.cfg.DataDir }

// QueueStat returns the figures of one queue.
func (n *Node) QueueStat(name string) (QueueStats, bool) {
	q, ok := n.store.Lookup(name)
	if !ok {
		return QueueStats{}, false
	}
	return q.Stats(), true
}

// Name returns the node's name.
func (n *Node) Name() string { return n.cfg.Name }

// ID returns the node's unique id, made at its first start.
func (n *Node) ID() message.NodeID { return n.id }

// Store returns the node's store, for tools that inspect it.
func (n *Node) Store() *queue.Store { return n.store }

// QueueStats returns every queue's figures, sorted by name.
func (n *Node) QueueStats() []QueueStats {
	qs := n.store.Queues()
	out := make([]queue.Stats, 0, len(qs))
	for _, q := range qs {
		out = append(out, q.Stats())
	}
	sortStats(out)
	return out
}

// receiveQueue returns the receive queue of a local address, creating it if
// it is declared or auto-creation is on.
func (n *Node) receiveQueue(ctx context.Context, name string) (*queue.Queue, error) {
	n.mu.Lock()
	a, declared := n.addresses[name]
	closed := n.closed
	n.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	if declared && a.Role != address.RoleReceive {
		return nil, fmt.Errorf("address %q is a %s address: %w", name, a.Role, ErrNotReceive)
	}
	if n.topics.isTopic(name) {
		return nil, fmt.Errorf("address %q is a topic (subscribe to it instead): %w", name, ErrNotReceive)
	}
	if q, ok := n.store.Lookup(name); ok {
		return q, nil
	}
	// Only a queue to be made is judged by name: what a queue that
	// exists holds (made by an older version) stays reachable, and a
	// send to one pays no second check of its name.
	if err := n.topics.misnamed(name); err != nil {
		return nil, err
	}
	if !declared && n.noAutoCreate.Load() && !queue.IsDeadLetter(name) {
		return nil, fmt.Errorf("address %q: %w (declare it, or allow auto_create)", name, ErrUnknownAddress)
	}
	if !declared {
		n.autoMu.Lock()
		defer n.autoMu.Unlock()
		if q, ok := n.store.Lookup(name); ok {
			return q, nil
		}
		if err := n.autoCreateRoom(name); err != nil {
			return nil, err
		}
	}
	q, err := n.store.Queue(ctx, name, queue.KindReceive)
	if err != nil {
		if errors.Is(err, queue.ErrKindMismatch) {
			return nil, fmt.Errorf("address %q: %w", name, ErrNotReceive)
		}
		return nil, err
	}
	if declared {
		q.SetPolicy(a.Queue)
	}
	return q, nil
}
