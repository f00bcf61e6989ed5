package queue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/gofrs/flock"
	_ "github.com/mattn/go-sqlite3" // the only importer of the driver
	"github.com/petrelmq/petrel/internal/logkey"
	"github.com/petrelmq/petrel/internal/sqliteuri"
)

// Kind is the role of a queue in the store.
type Kind int

const (
	// KindReceive queues hold messages for local consumers.
	KindReceive Kind = 1
	// KindSend queues shadow a remote receive queue: they hold messages
	// waiting to cross a link.
	KindSend Kind = 2
)

// String returns "receive" or "send".
func (k Kind) String() string {
	if k == KindSend {
		return "send"
	}
	return "receive"
}

// MarshalText writes the kind's name, for JSON.
func (k Kind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText reads "receive" or "send".
func (k *Kind) UnmarshalText(b []byte) error {
	switch string(b) {
	case "receive":
		*k = KindReceive
	case "send":
		*k = KindSend
	default:
		return fmt.Errorf("queue kind %q: want receive or send", b)
	}
	return nil
}

// Store is one node's durable store. It is safe for concurrent use.
type Store struct {
	cfg       Config
	log       *slog.Logger
	now       func() time.Time
	lock      *flock.Flock // held while the store is open (lockPath)
	wdb       *sql.DB      // migrations and the load at open; then closed
	rdb       *sql.DB      // readers: queue refills, sweeps, stats
	w         *writer
	ctx       context.Context // cancelled by Close; owns the sweeper
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	startOnce sync.Once
	ckpt      *rawConn      // the checkpointer's connection
	wal       walState      // the checkpointer's word to the writer
	readers   chan *rawConn // idle raw reader connections, for refills
	bodies    *bodyCache    // recent shared bodies, for refills
	// prefetched is what every queue's ready entries cost together (see
	// readyCost), against cfg.PrefetchTotalBytes.
	prefetched atomic.Int64

	mu     sync.RWMutex // guards queues, byName, closed
	queues map[int64]*Queue
	byName map[string]*Queue
	closed bool
}

func (c Config) withDefaults() Config {
	if c.MaxBatch <= 0 {
		c.MaxBatch = 4096
	}
	if c.DedupeWindow <= 0 {
		c.DedupeWindow = 24 * time.Hour
	}
	if c.DedupeMaxEntries <= 0 {
		c.DedupeMaxEntries = 1_000_000
	}
	if c.SweepInterval <= 0 {
		c.SweepInterval = time.Second
	}
	if c.PrefetchMessages <= 0 {
		c.PrefetchMessages = 8192
	}
	if c.PrefetchBytes <= 0 {
		c.PrefetchBytes = 4 << 20
	}
	if c.PrefetchTotalBytes <= 0 {
		c.PrefetchTotalBytes = 64 << 20
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func dsn(path string, sync SyncMode, readOnly bool) string {
	q := url.Values{}
	// WAL lets readers run beside the one writer and makes a commit one
	// sequential append plus (in full mode) one fsync.
	q.Set("_journal_mode", "WAL")
	// FULL fsyncs the WAL at every commit: an acked put survives power loss.
	// NORMAL fsyncs only at checkpoints: safe against process crashes.
	switch {
	case syncOffForTest:
		q.Set("_synchronous", "OFF")
	case sync == SyncNormal:
		q.Set("_synchronous", "NORMAL")
	default:
		q.Set("_synchronous", "FULL")
	}
	// Readers may meet a checkpoint; wait rather than fail.
	q.Set("_busy_timeout", "10000")
	// The writer takes the write lock at BEGIN so a batch never fails
	// half-way on an upgrade from a read lock.
	q.Set("_txlock", "immediate")
	if readOnly {
		q.Set("_query_only", "1")
	}
	return sqliteuri.URI(path, q)
}

// Open opens the store at cfg.Path and starts it: New then Start.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	s, err := New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	s.Start()
	return s, nil
}

// New opens (creating if needed) the store at cfg.Path, migrates its schema
// and loads its queues. Start starts its goroutines; Close stops them and
// closes the database, and must be called even if Start was not.
func New(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Path == "" {
		return nil, errors.New("open store: no path configured")
	}
	cfg = cfg.withDefaults()
	s := &Store{
		cfg:     cfg,
		log:     cfg.Logger.With(slog.String(logkey.Component, "queue")),
		now:     cfg.Now,
		queues:  make(map[int64]*Queue),
		byName:  make(map[string]*Queue),
		readers: make(chan *rawConn, maxReaders),
		bodies:  newBodyCache(4 * cfg.PrefetchBytes),
	}
	s.wal.failLog.Now = cfg.Now
	if err := s.takeLock(); err != nil {
		return nil, err
	}
	if err := s.openDBs(ctx); err != nil {
		s.closeDBs()
		return nil, err
	}
	if err := s.load(ctx); err != nil {
		s.closeDBs()
		return nil, err
	}
	// The writer has its own connection from here on; the pool that ran
	// the migrations and the load must not write beside it.
	s.wdb.Close()
	s.wdb = nil
	w, err := newWriter(s)
	if err != nil {
		s.closeDBs()
		return nil, err
	}
	s.w = w
	if s.ckpt, err = s.openCheckpointer(); err != nil {
		w.closeConn()
		s.closeDBs()
		return nil, err
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// Start starts the writer and the sweeper. It returns at once.
func (s *Store) Start() {
	s.startOnce.Do(func() {
		s.wg.Add(3)
		go func() { defer s.wg.Done(); s.w.loop() }()
		go func() { defer s.wg.Done(); s.sweepLoop(s.ctx) }()
		go func() { defer s.wg.Done(); s.checkpointLoop(s.ctx, s.ckpt) }()
		s.log.Info("store started", slog.String(logkey.Path, s.cfg.Path), slog.String("sync", s.cfg.Sync.String()), slog.Int("queues", len(s.queues)))
	})
}

func (s *Store) openDBs(ctx context.Context) error {
	if err := sqliteuri.CheckFiles(s.cfg.Path); err != nil {
		return fmt.Errorf("open store %s: %w", s.cfg.Path, err)
	}
	wdb, err := sql.Open("sqlite3", dsn(s.cfg.Path, s.cfg.Sync, false))
	if err != nil {
		return fmt.Errorf("open store %s: %w", s.cfg.Path, err)
	}
	// One connection: SQLite has one writer anyway, and the group commit
	// relies on being it.
	wdb.SetMaxOpenConns(1)
	if err := wdb.PingContext(ctx); err != nil {
		wdb.Close()
		return fmt.Errorf("open store %s: %w", s.cfg.Path, sqliteuri.WhyNotOpened(s.cfg.Path, err))
	}
	if err := migrate(ctx, wdb); err != nil {
		wdb.Close()
		return fmt.Errorf("open store %s: %w", s.cfg.Path, sqliteuri.WhyNotOpened(s.cfg.Path, err))
	}
	if err := checkWritable(ctx, wdb); err != nil {
		wdb.Close()
		return fmt.Errorf("open store %s: %w", s.cfg.Path, err)
	}
	rdb, err := sql.Open("sqlite3", dsn(s.cfg.Path, s.cfg.Sync, true))
	if err != nil {
		wdb.Close()
		return fmt.Errorf("open store %s: %w", s.cfg.Path, err)
	}
	rdb.SetMaxOpenConns(4)
	rdb.SetMaxIdleConns(4)
	s.wdb, s.rdb = wdb, rdb
	return nil
}

// checkWritable writes a row and rolls it back (sqliteuri.CheckWritable).
func checkWritable(ctx context.Context, db *sql.DB) error {
	return sqliteuri.CheckWritable(ctx, db, "INSERT OR REPLACE INTO meta(key, value) VALUES('write_check', x'')")
}

// lockPath is the file a Store locks beside its database.
func lockPath(db string) string { return db + ".lock" }

// takeLock takes the store's exclusive lock, or fails at once with
// ErrInUse. SQLite lets two processes open one database, and two nodes on
// one data directory would each deliver what the other leases, and give
// new messages the same ids, which their neighbours then drop as
// duplicates. The lock is an flock, which the system drops with the
// process, so a crash leaves nothing to clean.
func (s *Store) takeLock() error {
	lock := flock.New(lockPath(s.cfg.Path), flock.SetPermissions(0o600))
	ok, err := lock.TryLock()
	if err != nil {
		return fmt.Errorf("open store %s: lock %s: %w", s.cfg.Path, lock.Path(), err)
	}
	if !ok {
		lock.Close()
		return fmt.Errorf("open store %s: %s is held: %w", s.cfg.Path, lock.Path(), ErrInUse)
	}
	s.lock = lock
	return nil
}

// closeDBs closes the databases, then drops the lock.
func (s *Store) closeDBs() {
	defer func() {
		if s.lock != nil {
			s.lock.Close()
			s.lock = nil
		}
	}()
	if s.rdb != nil {
		s.rdb.Close()
	}
	if s.wdb != nil {
		s.wdb.Close()
	}
}

// load reads the queues and their persisted counters.
func (s *Store) load(ctx context.Context) error {
	if err := foldCounterLog(ctx, s.wdb); err != nil {
		return err
	}
	rows, err := s.wdb.QueryContext(ctx, `SELECT id, name, kind, depth, bytes, enqueued, acked, expired, deduped, dead_lettered, overflowed FROM queues`)
	if err != nil {
		return fmt.Errorf("load queues: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var name string
		var kind Kind
		var c counters
		if err := rows.Scan(&id, &name, &kind, &c.depth, &c.bytes, &c.enqueued, &c.acked, &c.expired, &c.deduped, &c.deadLettered, &c.overflowed); err != nil {
			return fmt.Errorf("load queues: %w", err)
		}
		q := newQueue(s, id, name, kind)
		q.c = c
		s.queues[id] = q
		s.byName[name] = q
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("load queues: %w", err)
	}
	return s.loadDedupeCounts(ctx)
}

func (s *Store) loadDedupeCounts(ctx context.Context) error {
	rows, err := s.wdb.QueryContext(ctx, `SELECT queue, sum(n) FROM dedupe_runs GROUP BY queue`)
	if err != nil {
		return fmt.Errorf("load dedupe window: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, n int64
		if err := rows.Scan(&id, &n); err != nil {
			return fmt.Errorf("load dedupe window: %w", err)
		}
		if q := s.queues[id]; q != nil {
			q.c.dedupeEntries = n
		}
	}
	return rows.Err()
}

// Close stops the sweeper, commits what was submitted, stops the writer and
// closes the database. Leases in flight are forgotten: their messages are
// delivered again after the next Open.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.w.close()
	// A store that never started drains its writer here, so that nothing
	// submitted waits forever.
	s.startOnce.Do(func() { s.w.loop(); s.ckpt.close() })
	s.wg.Wait()
	s.mu.RLock()
	for _, q := range s.queues {
		q.wake()
	}
	s.mu.RUnlock()
	err := s.w.closeConn()
	s.closeReaders()
	s.closeDBs()
	s.log.Info("store closed", slog.String(logkey.Path, s.cfg.Path))
	return err
}

// Queue returns the queue called name, creating it with kind if it does not
// exist. An existing queue of the other kind is ErrKindMismatch.
func (s *Store) Queue(ctx context.Context, name string, kind Kind) (*Queue, error) {
	if q, ok := s.Lookup(name); ok {
		if q.kind != kind {
			return nil, fmt.Errorf("queue %q is a %s queue: %w", name, q.kind, ErrKindMismatch)
		}
		return q, nil
	}
	r := &request{kind: reqCreateQueue, name: name, qkind: kind, op: newOp()}
	if err := s.w.submit(r); err != nil {
		return nil, err
	}
	if err := r.op.Wait(ctx); err != nil {
		return nil, fmt.Errorf("create queue %q: %w", name, err)
	}
	q, ok := s.Lookup(name)
	if !ok {
		return nil, fmt.Errorf("create queue %q: dropped as it was created: %w", name, ErrUnknownQueue)
	}
	if q.kind != kind {
		return nil, fmt.Errorf("queue %q is a %s queue: %w", name, q.kind, ErrKindMismatch)
	}
	return q, nil
}

// Lookup returns the queue called name if it exists.
func (s *Store) Lookup(name string) (*Queue, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	q, ok := s.byName[name]
	return q, ok
}

// Queues returns every queue, in no particular order.
func (s *Store) Queues() []*Queue {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]*Queue, 0, len(s.queues))
	for _, q := range s.queues {
		out = append(out, q)
	}
	return out
}

// register is called by the writer after a queue's row committed.
func (s *Store) register(q *Queue) {
	s.mu.Lock()
	s.queues[q.id] = q
	s.byName[q.name] = q
	s.mu.Unlock()
}

// Meta returns the value stored under key, or nil if none.
func (s *Store) Meta(ctx context.Context, key string) ([]byte, error) {
	var v []byte
	err := s.rdb.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = ?`, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read meta %q: %w", key, err)
	}
	return v, nil
}

// SetMeta durably stores value under key; a nil value deletes key.
func (s *Store) SetMeta(ctx context.Context, key string, value []byte) error {
	op, err := s.SubmitMeta(key, value)
	if err != nil {
		return err
	}
	return op.Wait(ctx)
}

// SubmitMeta is SetMeta that returns at once; the Op says when the change
// is committed. Changes of one key commit in the order they were
// submitted, with the puts of SubmitMarked.
func (s *Store) SubmitMeta(key string, value []byte) (*Op, error) {
	r := &request{kind: reqMeta, name: key, data: value, op: newOp()}
	if err := s.w.submit(r); err != nil {
		return nil, err
	}
	return r.op, nil
}

// MetaPrefix returns the meta keys that start with prefix, in order, with
// their values.
func (s *Store) MetaPrefix(ctx context.Context, prefix string) (keys []string, values [][]byte, err error) {
	// substr, not LIKE, which would read % and _ in prefix; it counts
	// characters.
	rows, err := s.rdb.QueryContext(ctx, `SELECT key, value FROM meta WHERE substr(key, 1, ?) = ? ORDER BY key`, utf8.RuneCountInString(prefix), prefix)
	if err != nil {
		return nil, nil, fmt.Errorf("read meta %q*: %w", prefix, err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			k string
			v []byte
		)
		if err := rows.Scan(&k, &v); err != nil {
			return nil, nil, fmt.Errorf("read meta %q*: %w", prefix, err)
		}
		keys, values = append(keys, k), append(values, v)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("read meta %q*: %w", prefix, err)
	}
	return keys, values, nil
}

// Totals returns the messages and bytes stored across every queue.
func (s *Store) Totals() (messages, bytes int64) {
	return s.w.totals()
}

// Prefetched returns what the queues' ready entries take in memory now,
// each message counted as its bytes and its entry's, and the bound on
// it (Config.PrefetchTotalBytes).
func (s *Store) Prefetched() (held, limit int64) {
	return s.prefetched.Load(), int64(s.cfg.PrefetchTotalBytes)
}

// Sync returns once every request submitted before it has committed: puts,
// acks, nacks and moves. Counters read after it include them.
func (s *Store) Sync(ctx context.Context) error {
	r := &request{kind: reqNoop, op: newOp()}
	if err := s.w.submit(r); err != nil {
		return err
	}
	return r.op.Wait(ctx)
}

// maxReaders caps the idle raw reader connections kept for refills.
const maxReaders = 4

// reader returns an idle raw reader connection, opening one if none is idle.
func (s *Store) reader() (*rawConn, error) {
	select {
	case rc := <-s.readers:
		return rc, nil
	default:
		return openRaw(dsn(s.cfg.Path, s.cfg.Sync, true))
	}
}

// putReader keeps rc for the next refill, or closes it if enough are idle.
func (s *Store) putReader(rc *rawConn) {
	if s.ctx.Err() != nil { // closing: closeReaders may have run already
		rc.close()
		return
	}
	select {
	case s.readers <- rc:
	default:
		rc.close()
	}
}

func (s *Store) closeReaders() {
	for {
		select {
		case rc := <-s.readers:
			rc.close()
		default:
			return
		}
	}
}
