package filetransfer

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

var (
	// ErrSpoolQuota is returned by BeginFor when the transfer would take
	// the spool, or its sender's share of it, past the quota. It is
	// transient: the transfer can begin once other transfers left the
	// spool, so the receiver pauses it and the sender tries again later.
	ErrSpoolQuota = errors.New("spool quota reached")
	// ErrOverQuota is returned by CheckQuota for a file that is larger
	// on its own than the spool quota or a sender's share of it: it can
	// never be received here, so it is refused for good.
	ErrOverQuota = errors.New("file larger than the spool quota")
)

// Quota bounds the space the transfers in a spool may take. Each transfer
// counts for the whole size its file announced from the moment it begins
// until it leaves the spool (delivered, aborted, corrupt or discarded),
// so that transfers admitted together can all complete. Zero fields mean
// no bound.
type Quota struct {
	// Max is the most bytes all the spool's transfers may take.
	Max int64
	// PerPeer is the most bytes the transfers from one sender (the peer
	// handing the file over) may take, so that one peer cannot take the
	// whole spool from the others.
	PerPeer int64
	// Held, when set, is a folder whose files count against Max too: the
	// copies a relay received whole and holds until it has forwarded them.
	// Its size is read at most once a second, when a transfer begins.
	Held string
}

// QuotaStats are the spool's figures against its quota.
type QuotaStats struct {
	Quota
	Used    int64 // bytes the transfers in the spool take, counted at their announced size
	Held    int64 // bytes in the Held folder, as last read
	Paused  int64 // transfers refused for a while (ErrSpoolQuota) since the spool opened
	Refused int64 // files refused for good (ErrOverQuota)
}

// hold is what one transfer takes from the quota.
type hold struct {
	peer string
	size int64
}

// quota is a Spool's accounting of its Quota.
type quota struct {
	mu      sync.Mutex
	limits  Quota
	used    int64
	perPeer map[string]int64
	held    map[string]hold // by transfer id

	heldBytes int64     // size of limits.Held, read at heldRead
	heldRead  time.Time // zero: never read

	paused, refused atomic.Int64
}

// heldSize returns the size of the Held folder, read again if the last
// reading is a second old; q.mu is held.
func (q *quota) heldSize() int64 {
	if q.limits.Held == "" {
		return 0
	}
	if now := time.Now(); q.heldRead.IsZero() || now.Sub(q.heldRead) >= time.Second {
		q.heldBytes, q.heldRead = dirSize(q.limits.Held), now
	}
	return q.heldBytes
}

// dirSize adds up the sizes of the regular files under dir. What cannot be
// read counts as nothing: the quota is a bound on what the node makes, not
// an audit of the disk.
func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// SetQuota sets the spool's quota, and counts the transfers that are in
// the spool already (left by an earlier run) against it, at their
// announced size; their sender is unknown until they resume, so they
// count only against the total. Call it once, after OpenSpool.
func (s *Spool) SetQuota(q Quota) error {
	pending, err := s.Pending()
	if err != nil {
		return err
	}
	s.quota.mu.Lock()
	defer s.quota.mu.Unlock()
	s.quota.limits = q
	s.quota.held, s.quota.perPeer, s.quota.used = map[string]hold{}, map[string]int64{}, 0
	for _, p := range pending {
		s.quota.take(p.ID, hold{size: p.Info.Size})
	}
	return nil
}

// CheckQuota returns an error wrapping ErrOverQuota when a file of size
// bytes from peer could never fit: it is larger than the quota or than a
// peer's share.
func (s *Spool) CheckQuota(peer string, size int64) error {
	s.quota.mu.Lock()
	q := s.quota.limits
	s.quota.mu.Unlock()
	var err error
	switch {
	case q.Max > 0 && size > q.Max:
		err = fmt.Errorf("a file of %d bytes from %s: the spool quota is %d bytes (files.max_spool_bytes): %w", size, peer, q.Max, ErrOverQuota)
	case q.PerPeer > 0 && size > q.PerPeer:
		err = fmt.Errorf("a file of %d bytes from %s: a peer's share of the spool is %d bytes (files.max_spool_bytes_per_peer): %w", size, peer, q.PerPeer, ErrOverQuota)
	}
	if err != nil {
		s.quota.refused.Add(1)
	}
	return err
}

// BeginFor is Begin for a file handed over by peer, within the quota: a
// transfer that would take the spool or the peer's share past it is not
// begun, and the error wraps ErrSpoolQuota. A transfer already in the
// spool (a resume) is always let through, since its bytes are here
// already, unless its file grew.
func (s *Spool) BeginFor(peer, id string, info Info) (*Incoming, error) {
	if err := s.quota.reserve(id, hold{peer: peer, size: info.Size}); err != nil {
		return nil, err
	}
	in, err := s.Begin(id, info)
	if err != nil {
		s.settle(id)
		return nil, err
	}
	return in, nil
}

// QuotaStats returns the spool's figures against its quota.
func (s *Spool) QuotaStats() QuotaStats {
	s.quota.mu.Lock()
	defer s.quota.mu.Unlock()
	return QuotaStats{Quota: s.quota.limits, Used: s.quota.used, Held: s.quota.heldBytes,
		Paused: s.quota.paused.Load(), Refused: s.quota.refused.Load()}
}

// settle gives back what the transfer id took, if it left the spool (its
// state file is gone). Spool.release calls it whenever an Incoming lets an
// id go, whether it closed (the transfer stays) or finished.
func (s *Spool) settle(id string) {
	if _, err := os.Lstat(s.statePath(id)); !errors.Is(err, fs.ErrNotExist) {
		return
	}
	s.quota.mu.Lock()
	defer s.quota.mu.Unlock()
	if h, ok := s.quota.held[id]; ok {
		s.quota.give(id, h)
	}
}

// reserve makes transfer id take h, or returns why it cannot.
func (q *quota) reserve(id string, h hold) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.held == nil {
		q.held, q.perPeer = map[string]hold{}, map[string]int64{}
	}
	old, had := q.held[id]
	if had && h.size <= old.size {
		q.give(id, old)
		q.take(id, h)
		return nil
	}
	used, peerUsed := q.used-old.size+q.heldSize(), q.perPeer[h.peer]
	if old.peer == h.peer {
		peerUsed -= old.size
	}
	var err error
	switch {
	case q.limits.Max > 0 && used+h.size > q.limits.Max:
		err = fmt.Errorf("a file of %d bytes from %s: the spool's transfers and held files take %d of %d bytes (files.max_spool_bytes); it waits for room: %w",
			h.size, h.peer, used, q.limits.Max, ErrSpoolQuota)
	case q.limits.PerPeer > 0 && peerUsed+h.size > q.limits.PerPeer:
		err = fmt.Errorf("a file of %d bytes from %s: its transfers take %d of its %d-byte share (files.max_spool_bytes_per_peer); it waits for room: %w",
			h.size, h.peer, peerUsed, q.limits.PerPeer, ErrSpoolQuota)
	}
	if err != nil {
		q.paused.Add(1)
		return err
	}
	if had {
		q.give(id, old)
	}
	q.take(id, h)
	return nil
}

// take and give move h in and out of the counts; q.mu is held.
func (q *quota) take(id string, h hold) {
	q.held[id] = h
	q.used += h.size
	q.perPeer[h.peer] += h.size
}

func (q *quota) give(id string, h hold) {
	delete(q.held, id)
	q.used -= h.size
	if q.perPeer[h.peer] -= h.size; q.perPeer[h.peer] <= 0 {
		delete(q.perPeer, h.peer)
	}
}
