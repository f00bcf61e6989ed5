package mqttgw

import (
	"context"
	"path/filepath"
	"testing"
)

// mqtt.db's rows hold JSON that the gateway reads back at start: the
// persistent sessions, their subscriptions, the retained messages and the
// delayed wills. Whatever a row holds (a disk fault, an older or a foreign
// writer), reading it returns the row or an error that names it, and never
// panics: the node then refuses to start with that error rather than
// losing the row.
func FuzzStoredRecords(f *testing.F) {
	for _, seed := range []string{
		`{"id":"c1","t":"client","listener":"mqtt","username":"YWxpY2U=","v":5,"clean":false,"props":{"sei":3600,"seif":true}}`,
		`{"filter":"sensors/#","identifier":0,"qos":1,"client":"c1","t":"subscription"}`,
		`{"payload":"aGk=","topic_name":"sensors/a","fixed_header":{"type":3,"qos":1,"retain":true},"properties":{"user":[{"k":"a","v":"b"}]}}`,
		`null`, `[]`, `{"fixed_header":{"remaining":-1}}`, `{`, ``,
	} {
		f.Add([]byte(seed))
	}
	ctx := context.Background()
	// The store's schema, without its fsyncs: a fuzz run makes thousands
	// of rows.
	db, err := openDB(filepath.Join(f.TempDir(), "mqtt.db"), "OFF")
	if err != nil {
		f.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, schema); err != nil {
		f.Fatal(err)
	}
	s := &sessionStore{db: db}
	f.Cleanup(func() { _ = s.close() })
	f.Fuzz(func(t *testing.T, blob []byte) {
		for _, q := range []string{`DELETE FROM sessions`, `DELETE FROM subscriptions`, `DELETE FROM retained`, `DELETE FROM wills`} {
			if _, err := s.db.ExecContext(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.db.ExecContext(ctx, `INSERT INTO sessions (client_id, client, identity) VALUES ('c1', ?, 'alice');
			INSERT INTO subscriptions (client_id, filter, sub) VALUES ('c1', 'sensors/#', ?);
			INSERT INTO retained (topic, packet) VALUES ('sensors/a', ?);
			INSERT INTO wills (client_id, due_ms, identity, remote, packet) VALUES ('c1', 1, 'alice', '127.0.0.1:1', ?)`,
			blob, blob, blob, blob); err != nil {
			t.Fatal(err)
		}
		if cs, err := s.sessions(ctx); err == nil && len(cs) != 1 {
			t.Fatalf("%d sessions read back from one row", len(cs))
		}
		if subs, err := s.subscriptions(ctx); err == nil && len(subs) != 1 {
			t.Fatalf("%d subscriptions read back from one row", len(subs))
		}
		if ms, err := s.retained(ctx); err == nil {
			if len(ms) != 1 {
				t.Fatalf("%d retained messages read back from one row", len(ms))
			}
			_ = ms[0].ToPacket()
		}
		if ws, err := s.wills(ctx); err == nil {
			if len(ws) != 1 || ws[0].clientID != "c1" || ws[0].conn.Identity != "alice" {
				t.Fatalf("wills read back %+v", ws)
			}
		}
		if owner, ok, err := s.sessionOwner(ctx, "c1"); err != nil || !ok || owner != "alice" {
			t.Fatalf("owner %q, %v, %v", owner, ok, err)
		}
	})
}
