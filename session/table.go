package session

import (
	"fmt"
	"sync"
)

// table holds a connection's sessions by id. The read loop looks sessions
// up in it for every frame; Open, Accept, Close and the read loop add and
// remove them. Once the connection died (endAll), it takes no more.
type table struct {
	mu   sync.Mutex
	m    map[uint32]*Session
	next uint32 // client: the next id to try; 0 on a server
	max  int
	dead error // set by endAll
}

func newTable(max int) *table {
	return &table{m: make(map[uint32]*Session), max: max}
}

func (t *table) get(id uint32) *Session {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.m[id]
}

func (t *table) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}

// addClient picks a free id for s, never 0, sets s.id and adds it. Ids
// increase, so an id is reused only after 2^32 sessions on one connection.
// s.id is set under the lock, before the read loop can find s.
func (t *table) addClient(s *Session) (uint32, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.check(); err != nil {
		return 0, err
	}
	for {
		id := t.next
		t.next++
		if _, used := t.m[id]; id != 0 && !used {
			s.id = id
			t.m[id] = s
			return id, nil
		}
	}
}

// addServer adds s under the id the client chose. An id in use is a
// protocol error (ErrProtocol); a full table is ErrLimit, which the caller
// turns into a refusal.
func (t *table) addServer(id uint32, s *Session) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, used := t.m[id]; used {
		return fmt.Errorf("SessionCreate for session %d, which is already in use: %w", id, ErrProtocol)
	}
	if err := t.check(); err != nil {
		return err
	}
	t.m[id] = s
	return nil
}

func (t *table) check() error {
	if t.dead != nil {
		return t.dead
	}
	if len(t.m) >= t.max {
		return fmt.Errorf("%d sessions already open on this connection: %w", len(t.m), ErrLimit)
	}
	return nil
}

// remove deletes id if it still maps to s, and reports whether it did.
func (t *table) remove(id uint32, s *Session) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m[id] != s {
		return false
	}
	delete(t.m, id)
	return true
}

// endAll ends every session with err and refuses new ones; the read loop
// calls it when it stops.
func (t *table) endAll(err error) {
	t.mu.Lock()
	t.dead = err
	all := t.m
	t.m = map[uint32]*Session{}
	t.mu.Unlock()
	for _, s := range all {
		s.end(err, false)
	}
}
