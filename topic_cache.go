package petrel

import (
	"sync"
	"sync/atomic"
)

// answers caches what a publish asks of a table that changes rarely (the
// subscriptions, the learned interest), by the question's key, as NATS
// caches its subject lookups: a publish then costs one lookup rather than
// a match against every pattern of the table.
//
// The table's owner empties it (forget) under its write lock whenever the
// table changes, and gets and puts under its read lock, so that no answer
// computed from the table before a change is stored after it; mu orders
// the readers' puts. It holds at most answersMax keys, answersWeight in
// all (an answer weighs its length) and answersKeyBytes of keys; past
// any, it starts again empty.
type answers[V any] struct {
	mu       sync.Mutex
	m        map[string]V
	weight   int
	keyBytes int
	hits     atomic.Int64
}

// The bounds of every answers: keys, the weight of their answers (a topic
// that every subscription matches holds them all), and the bytes of the
// keys, which a peer chooses: a topic name is at most 128 bytes, but the
// hops of a next-hops question come in a property of up to 64 KiB.
const (
	answersMax      = 4096
	answersWeight   = 1 << 16
	answersKeyBytes = 1 << 20
)

// get returns the answer kept for key, counting a hit.
func (a *answers[V]) get(key string) (V, bool) {
	a.mu.Lock()
	v, ok := a.m[key]
	a.mu.Unlock()
	if ok {
		a.hits.Add(1)
	}
	return v, ok
}

// put keeps v, of weight w, as key's answer.
func (a *answers[V]) put(key string, v V, w int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil || len(a.m) >= answersMax || a.weight+w > answersWeight || a.keyBytes+len(key) > answersKeyBytes {
		a.m, a.weight, a.keyBytes = make(map[string]V), 0, 0
	}
	a.m[key] = v
	a.weight += w
	a.keyBytes += len(key)
}

// forget empties the cache; the owner holds its table's write lock.
func (a *answers[V]) forget() {
	a.mu.Lock()
	a.m, a.weight, a.keyBytes = nil, 0, 0
	a.mu.Unlock()
}

// size returns how many answers are kept.
func (a *answers[V]) size() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.m)
}
