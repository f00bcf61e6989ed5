package receiver

import (
	"container/list"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/petrelmq/petrel/filetransfer"
	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/session"
)

// TransferStatus is one file this node is receiving, or whose last
// attempt failed and waits for the sender to come back.
type TransferStatus struct {
	ID       string             `json:"id"`
	Filename string             `json:"filename"`
	From     string             `json:"from"` // the peer sending it
	Dest     string             `json:"destination"`
	Size     int64              `json:"size"`
	Offset   int64              `json:"offset"`   // bytes durable here: where a resume starts
	Received int64              `json:"received"` // bytes arrived, durable or not
	State    filetransfer.State `json:"state"`    // receiving, paused
	Error    string             `json:"error,omitempty"`
	Since    time.Time          `json:"since"`
}

// transfer is the record of one file being received, or paused.
type transfer struct {
	reg *transfers
	key transferKey
	// conn is the connection whose file session received it (nil in unit
	// tests): once that connection has ended, nothing on it can resume
	// the file, and connClosed drops the entry.
	conn *session.Conn
	st   TransferStatus
	// pausedAt and peerAt are its elements in reg.pausedList and
	// reg.peerPaused[peer] while it is paused and listed, else nil.
	pausedAt, peerAt *list.Element
}

// transferKey names an entry: the peer sending the file, and the file's
// transfer id. A sender that announces the same file again (it retries
// after a pause) replaces its entry rather than adds one, and a peer's
// announcement never hides another peer's transfer of the same file.
type transferKey struct{ peer, id string }

// TransferEnd is how a file this node received ended: taken (State
// delivered at its destination, held at a relay that forwards it) or
// failed (refused, corrupt, given up by its sender), with why in Error.
type TransferEnd struct {
	TransferStatus
	At time.Time `json:"at"`
}

// maxEnded bounds the ended transfers remembered, oldest dropped first: a
// peer that announces file after file to be refused spends no more.
const maxEnded = 1024

// Bounds on the paused entries listed. A paused entry has no session
// behind it any more (the sender tries the file again on a new one), so
// nothing else bounds how many a peer can leave: one per file it
// announces past the spool quota. Past a bound the entry paused longest
// ago is dropped from the list, and counted (TransfersEvicted). Only the
// list forgets it: its partial file stays in the spool, and the sender's
// next try lists it again. Entries being received are not counted: each
// holds a live session, which the session bounds limit.
const (
	// maxPausedPerPeer is 64: a sender moves 4 files per send queue at
	// once by default (files.concurrency), so this lets 16 send queues
	// of one peer all show their paused files.
	maxPausedPerPeer = 64
	// maxPaused bounds all peers together (a node serving a few hundred
	// peers); an entry is a few hundred bytes beside its strings, which
	// the message limits bound.
	maxPaused = 4096
)

// transfers is the server's registry of files in progress: what the
// status shows. A paused entry stays while the connection it came on
// lives, until the file is taken or its sender starts it again, within
// the bounds above; connClosed drops the entries of a connection that
// ended. ended remembers the last files that ended, for the console.
type transfers struct {
	mu         sync.Mutex
	m          map[transferKey]*transfer
	pausedList list.List             // of *transfer: the paused entries, paused longest ago first
	peerPaused map[string]*list.List // the same, per peer
	evicted    atomic.Int64          // paused entries dropped for the bounds
	ended      []TransferEnd         // oldest first, at most maxEnded
}

// begin lists the file id that peer started to send on c, from offset,
// in place of the peer's earlier entry for it.
func (r *transfers) begin(c *session.Conn, id string, m *message.Message, peer string, offset int64) *transfer {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.newTransfer(c, id, m, peer, offset)
	r.put(t)
	return t
}

func (r *transfers) newTransfer(c *session.Conn, id string, m *message.Message, peer string, offset int64) *transfer {
	return &transfer{reg: r, key: transferKey{peer, id}, conn: c, st: TransferStatus{
		ID: id, Filename: m.File.Filename, From: peer, Dest: m.Destination,
		Size: m.File.Filesize, Offset: offset, Received: offset, State: filetransfer.StateReceiving, Since: time.Now(),
	}}
}

// put lists t, replacing the entry of the same key; r.mu is held.
func (r *transfers) put(t *transfer) {
	if r.m == nil {
		r.m = map[transferKey]*transfer{}
	}
	if old := r.m[t.key]; old != nil {
		r.remove(old)
	}
	r.m[t.key] = t
	if t.st.State == filetransfer.StatePaused {
		r.addPaused(t)
	}
}

// remove unlists t; r.mu is held.
func (r *transfers) remove(t *transfer) {
	if r.m[t.key] == t {
		delete(r.m, t.key)
	}
	if t.pausedAt != nil {
		r.pausedList.Remove(t.pausedAt)
		pl := r.peerPaused[t.key.peer]
		pl.Remove(t.peerAt)
		if pl.Len() == 0 {
			delete(r.peerPaused, t.key.peer)
		}
		t.pausedAt, t.peerAt = nil, nil
	}
}

// addPaused counts t, listed and just paused, against the bounds, and
// drops the entries paused longest ago past them; r.mu is held.
func (r *transfers) addPaused(t *transfer) {
	if t.pausedAt != nil {
		return
	}
	if r.peerPaused == nil {
		r.peerPaused = map[string]*list.List{}
	}
	pl := r.peerPaused[t.key.peer]
	if pl == nil {
		pl = list.New()
		r.peerPaused[t.key.peer] = pl
	}
	t.pausedAt, t.peerAt = r.pausedList.PushBack(t), pl.PushBack(t)
	for pl.Len() > maxPausedPerPeer {
		r.evict(pl.Front().Value.(*transfer))
	}
	for r.pausedList.Len() > maxPaused {
		r.evict(r.pausedList.Front().Value.(*transfer))
	}
}

func (r *transfers) evict(t *transfer) {
	r.remove(t)
	r.evicted.Add(1)
}

func (t *transfer) progress(offset int64) {
	t.reg.mu.Lock()
	t.st.Offset = offset
	t.st.Received = max(t.st.Received, offset)
	t.reg.mu.Unlock()
}

func (t *transfer) received(n int64) {
	t.reg.mu.Lock()
	t.st.Received = n
	t.reg.mu.Unlock()
}

// paused records why the transfer stopped short; it resumes when its
// sender tries again.
func (r *transfers) paused(t *transfer, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t.st.State, t.st.Error = filetransfer.StatePaused, err.Error()
	if r.m[t.key] == t {
		r.addPaused(t)
	}
}

// failed records a transfer that could not even begin (a full spool, the
// spool quota): paused at once, so that it is never listed as received.
func (r *transfers) failed(c *session.Conn, id string, m *message.Message, peer string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.newTransfer(c, id, m, peer, 0)
	t.st.State, t.st.Error = filetransfer.StatePaused, err.Error()
	r.put(t)
}

// end drops the entry unless it is paused.
func (r *transfers) end(t *transfer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t.st.State != filetransfer.StatePaused {
		r.remove(t)
	}
}

// connClosed drops the entries of c, whose sessions have all ended: a
// paused file can only resume on a session its sender opens on another
// connection, which lists it again. What the file left in the spool
// stays there, until the sender resumes it or files.abandon_after.
func (r *transfers) connClosed(c *session.Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, t := range r.m {
		if t.conn == c {
			r.remove(t)
		}
	}
}

// taken records that the file of t is whole, verified and committed:
// delivered here, or held to forward when relay.
func (r *transfers) taken(t *transfer, relay bool) {
	r.mu.Lock()
	st := t.st
	r.mu.Unlock()
	st.State, st.Error, st.Offset, st.Received = filetransfer.StateDelivered, "", st.Size, st.Size
	if relay {
		st.State = filetransfer.StateHeld
	}
	r.record(st)
}

// endedFailed records a file that ended here without being taken: its
// announcement refused, its content corrupt, or given up by its sender.
// received is how many bytes had arrived.
func (r *transfers) endedFailed(id string, m *message.Message, peer string, received int64, err error) {
	st := TransferStatus{ID: id, From: peer, State: filetransfer.StateFailed, Error: err.Error(), Received: received}
	if m != nil {
		st.Filename, st.Dest, st.Size = m.File.Filename, m.Destination, m.File.Filesize
	}
	r.record(st)
}

func (r *transfers) record(st TransferStatus) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.ended) == maxEnded {
		copy(r.ended, r.ended[1:])
		r.ended = r.ended[:maxEnded-1]
	}
	r.ended = append(r.ended, TransferEnd{TransferStatus: st, At: time.Now()})
}

// endedSince returns the ended transfers recorded after cut, oldest
// first.
func (r *transfers) endedSince(cut time.Time) []TransferEnd {
	r.mu.Lock()
	defer r.mu.Unlock()
	i := sort.Search(len(r.ended), func(i int) bool { return r.ended[i].At.After(cut) })
	return append([]TransferEnd(nil), r.ended[i:]...)
}

func (r *transfers) list() []TransferStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]TransferStatus, 0, len(r.m))
	for _, t := range r.m {
		out = append(out, t.st)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].ID != out[j].ID {
			return out[i].ID < out[j].ID
		}
		return out[i].From < out[j].From
	})
	return out
}

// Transfers returns the files being received, and those paused while
// the connection they came on is up (at most 64 per peer and 4,096 in
// all; see maxPausedPerPeer).
func (s *Server) Transfers() []TransferStatus { return s.transfers.list() }

// TransfersEvicted counts the paused transfers dropped from the list for
// its bounds since the server started.
func (s *Server) TransfersEvicted() int64 { return s.transfers.evicted.Load() }

// EndedTransfers returns the files received that ended after cut, taken or
// failed, oldest first: the last 1,024 at most.
func (s *Server) EndedTransfers(cut time.Time) []TransferEnd { return s.transfers.endedSince(cut) }
