package mqttgw

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/storage"
	"github.com/mochi-mqtt/server/v2/packets"

	// The SQLite driver, as the node's store uses it.
	_ "github.com/mattn/go-sqlite3"

	"github.com/petrelmq/petrel/internal/sqliteuri"
)

// sessionStore keeps, in its own SQLite file in the node's data directory
// (mqtt.db), what MQTT needs beyond the node's queues: the retained
// message of each topic, the wills waiting for their delay (will.go), and the
// persistent sessions with their subscriptions, so that a restarted node knows them (CONNACK's session
// present flag, each filter's QoS and options). The messages a persistent
// session has not taken are not here: they are in its durable Petrel
// subscriptions, in the node's store.
//
// Writes are synchronous and fsynced (synchronous=FULL): a retained
// message is acknowledged to its publisher only once it is here too.
type sessionStore struct {
	db *sql.DB
}

const schema = `
CREATE TABLE IF NOT EXISTS retained (
	topic TEXT PRIMARY KEY,
	packet BLOB NOT NULL
);
-- identity is the session's owner, the identity that made it: only that
-- identity may resume or take it over (addOwnerColumn adds it to a store
-- made before).
CREATE TABLE IF NOT EXISTS sessions (
	client_id TEXT PRIMARY KEY,
	client BLOB NOT NULL,
	identity TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS wills (
	client_id TEXT PRIMARY KEY,
	due_ms INTEGER NOT NULL,
	identity TEXT NOT NULL,
	remote TEXT NOT NULL,
	packet BLOB NOT NULL
);
-- The QoS 2 markers of earlier versions, moved to the node's store at
-- start (qos2.go).
CREATE TABLE IF NOT EXISTS qos2 (
	client_id TEXT NOT NULL,
	packet_id INTEGER NOT NULL,
	created INTEGER NOT NULL,
	PRIMARY KEY (client_id, packet_id)
);
CREATE TABLE IF NOT EXISTS subscriptions (
	client_id TEXT NOT NULL,
	filter TEXT NOT NULL,
	sub BLOB NOT NULL,
	PRIMARY KEY (client_id, filter)
);
`

// openStore opens mqtt.db at path with the checks the node's store makes
// (sqliteuri.CheckFiles): a file it cannot write, or an empty one beside a
// log that holds data, stops the node at start with the reason, rather
// than let it say ready and then fail every retained message and session,
// or throw the log away.
func openStore(path string) (*sessionStore, error) {
	if err := sqliteuri.CheckFiles(path); err != nil {
		return nil, fmt.Errorf("open mqtt store %s: %w", path, err)
	}
	// WAL and FULL, as the node's store: a commit is one append and one
	// fsync, and survives power loss.
	db, err := openDB(path, "FULL")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, schema); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open mqtt store %s: %w", path, sqliteuri.WhyNotOpened(path, err))
	}
	if err := addOwnerColumn(ctx, db); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open mqtt store %s: %w", path, err)
	}
	if err := sqliteuri.CheckWritable(ctx, db, `INSERT OR REPLACE INTO retained (topic, packet) VALUES ('', x'')`); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open mqtt store %s: %w", path, err)
	}
	return &sessionStore{db: db}, nil
}

// addOwnerColumn gives a store made before sessions had an owner the
// sessions.identity column. Its sessions keep an empty owner, which the
// first identity that resumes one takes (see hook.ownerRefusal).
func addOwnerColumn(ctx context.Context, db *sql.DB) error {
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM pragma_table_info('sessions') WHERE name = 'identity'`).Scan(&n); err != nil {
		return fmt.Errorf("read the sessions table: %w", err)
	}
	if n > 0 {
		return nil
	}
	if _, err := db.ExecContext(ctx, `ALTER TABLE sessions ADD COLUMN identity TEXT NOT NULL DEFAULT ''`); err != nil {
		return fmt.Errorf("add the sessions' owner: %w", err)
	}
	return nil
}

func openDB(path, synchronous string) (*sql.DB, error) {
	q := url.Values{}
	q.Set("_journal_mode", "WAL")
	q.Set("_synchronous", synchronous)
	q.Set("_busy_timeout", "10000")
	db, err := sql.Open("sqlite3", sqliteuri.URI(path, q))
	if err != nil {
		return nil, fmt.Errorf("open mqtt store: %w", err)
	}
	// One writer: SQLite serialises writers anyway, and one connection
	// avoids busy retries between them.
	db.SetMaxOpenConns(1)
	return db, nil
}

func (s *sessionStore) close() error {
	return s.db.Close()
}

// setRetainedAll stores each of pks, in order, as its topic's retained
// message, or deletes the topic's when its payload is empty
// (MQTT-3.3.1-6, -7), all in one transaction.
func (s *sessionStore) setRetainedAll(ctx context.Context, pks []packets.Packet) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit, a no-op
	for _, pk := range pks {
		if len(pk.Payload) == 0 {
			if _, err := tx.ExecContext(ctx, `DELETE FROM retained WHERE topic = ?`, pk.TopicName); err != nil {
				return err
			}
			continue
		}
		b, err := encodePacket(pk)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO retained (topic, packet) VALUES (?, ?)
			ON CONFLICT (topic) DO UPDATE SET packet = excluded.packet`, pk.TopicName, b); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// encodePacket is a publish as stored (mochi's storage.Message, JSON).
func encodePacket(pk packets.Packet) ([]byte, error) {
	return json.Marshal(storage.Message{
		Payload:     pk.Payload,
		TopicName:   pk.TopicName,
		Origin:      pk.Origin,
		FixedHeader: pk.FixedHeader,
		Created:     pk.Created,
		Properties: storage.MessageProperties{
			CorrelationData:       pk.Properties.CorrelationData,
			User:                  pk.Properties.User,
			ContentType:           pk.Properties.ContentType,
			ResponseTopic:         pk.Properties.ResponseTopic,
			MessageExpiryInterval: pk.Properties.MessageExpiryInterval,
			PayloadFormat:         pk.Properties.PayloadFormat,
			PayloadFormatFlag:     pk.Properties.PayloadFormatFlag,
		},
	})
}

func (s *sessionStore) deleteRetained(ctx context.Context, topic string) error {
	_, err := s.db.ExecContext(ctx, `DELETE FROM retained WHERE topic = ?`, topic)
	return err
}

func (s *sessionStore) retained(ctx context.Context) ([]storage.Message, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT packet FROM retained ORDER BY topic`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []storage.Message
	for rows.Next() {
		var b []byte
		var m storage.Message
		if err := rows.Scan(&b); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, fmt.Errorf("retained message: %w", err)
		}
		m.T = storage.RetainedKey
		out = append(out, m)
	}
	return out, rows.Err()
}

// saveSession records a persistent session's client, owned by identity.
func (s *sessionStore) saveSession(ctx context.Context, cl *mqtt.Client, identity string) error {
	c := storage.Client{
		ID:              cl.ID,
		T:               storage.ClientKey,
		Listener:        cl.Net.Listener,
		Username:        cl.Properties.Username,
		ProtocolVersion: cl.Properties.ProtocolVersion,
		Clean:           cl.Properties.Clean,
		Properties: storage.ClientProperties{
			SessionExpiryInterval:     cl.Properties.Props.SessionExpiryInterval,
			SessionExpiryIntervalFlag: cl.Properties.Props.SessionExpiryIntervalFlag,
			ReceiveMaximum:            cl.Properties.Props.ReceiveMaximum,
			MaximumPacketSize:         cl.Properties.Props.MaximumPacketSize,
		},
	}
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	_, err = s.db.ExecContext(ctx, `INSERT INTO sessions (client_id, client, identity) VALUES (?, ?, ?)
		ON CONFLICT (client_id) DO UPDATE SET client = excluded.client, identity = excluded.identity`, cl.ID, b, identity)
	return err
}

// sessionOwner returns the identity that owns clientID's stored session,
// and false when none is stored. A session stored before sessions had an
// owner has an empty one.
func (s *sessionStore) sessionOwner(ctx context.Context, clientID string) (string, bool, error) {
	var owner string
	err := s.db.QueryRowContext(ctx, `SELECT identity FROM sessions WHERE client_id = ?`, clientID).Scan(&owner)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return owner, true, nil
}

// owners returns the identity that owns each stored session, by client
// id; "" for one stored before sessions had an owner.
func (s *sessionStore) owners(ctx context.Context) (map[string]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT client_id, identity FROM sessions`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var id, owner string
		if err := rows.Scan(&id, &owner); err != nil {
			return nil, err
		}
		out[id] = owner
	}
	return out, rows.Err()
}

// dropSession forgets a session and its subscriptions; qos2Forget drops
// its QoS 2 markers.
func (s *sessionStore) dropSession(ctx context.Context, clientID string) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE client_id = ?`, clientID); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM subscriptions WHERE client_id = ?`, clientID); err != nil {
		return err
	}
	return tx.Commit()
}

func (s *sessionStore) saveSubscription(ctx context.Context, clientID string, sub packets.Subscription) error {
	b, err := json.Marshal(storage.Subscription{
		T: storage.SubscriptionKey, Client: clientID, Filter: sub.Filter, Identifier: sub.Identifier,
		RetainHandling: sub.RetainHandling, Qos: sub.Qos, RetainAsPublished: sub.RetainAsPublished, NoLocal: sub.NoLocal,
	})
	if err != nil {
		return err
	}
	_, err = s.db.ExecContext(ctx, `INSERT INTO subscriptions (client_id, filter, sub) VALUES (?, ?, ?)
		ON CONFLICT (client_id, filter) DO UPDATE SET sub = excluded.sub`, clientID, sub.Filter, b)
	return err
}

func (s *sessionStore) dropSubscription(ctx context.Context, clientID, filter string) error {
	_, err := s.db.ExecContext(ctx, `DELETE FROM subscriptions WHERE client_id = ? AND filter = ?`, clientID, filter)
	return err
}

func (s *sessionStore) sessions(ctx context.Context) ([]storage.Client, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT client FROM sessions ORDER BY client_id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []storage.Client
	for rows.Next() {
		var b []byte
		var c storage.Client
		if err := rows.Scan(&b); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(b, &c); err != nil {
			return nil, fmt.Errorf("mqtt session: %w", err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

func (s *sessionStore) subscriptions(ctx context.Context) ([]storage.Subscription, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT sub FROM subscriptions ORDER BY client_id, filter`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []storage.Subscription
	for rows.Next() {
		var b []byte
		var c storage.Subscription
		if err := rows.Scan(&b); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(b, &c); err != nil {
			return nil, fmt.Errorf("mqtt subscription: %w", err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}
