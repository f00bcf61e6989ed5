package receiver

import (
	"sort"
	"sync"
	"time"

	"github.com/petrelmq/petrel/filetransfer"
	"github.com/petrelmq/petrel/message"
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

// transfer is the live record of one file being received.
type transfer struct {
	reg *transfers
	st  TransferStatus
}

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

// transfers is the server's registry of files in progress: what the
// status shows. A paused entry stays until the file is taken or its
// sender starts again. ended remembers the last files that ended, for
// the console.
type transfers struct {
	mu    sync.Mutex
	m     map[string]*transfer
	ended []TransferEnd // oldest first, at most maxEnded
}

func (r *transfers) begin(id string, m *message.Message, peer string, offset int64) *transfer {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]*transfer{}
	}
	t := &transfer{reg: r, st: TransferStatus{
		ID: id, Filename: m.File.Filename, From: peer, Dest: m.Destination,
		Size: m.File.Filesize, Offset: offset, Received: offset, State: filetransfer.StateReceiving, Since: time.Now(),
	}}
	r.m[id] = t
	return t
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
// sender comes back.
func (r *transfers) paused(t *transfer, err error) {
	r.mu.Lock()
	t.st.State, t.st.Error = filetransfer.StatePaused, err.Error()
	r.mu.Unlock()
}

// failed records a transfer that could not even begin (a full spool).
func (r *transfers) failed(id string, m *message.Message, peer string, err error) {
	t := r.begin(id, m, peer, 0)
	r.paused(t, err)
}

// end drops the entry unless it is paused.
func (r *transfers) end(t *transfer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t.st.State != filetransfer.StatePaused && r.m[t.st.ID] == t {
		delete(r.m, t.st.ID)
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
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Transfers returns the files being received, and those paused.
func (s *Server) Transfers() []TransferStatus { return s.transfers.list() }

// EndedTransfers returns the files received that ended after cut, taken or
// failed, oldest first: the last 1,024 at most.
func (s *Server) EndedTransfers(cut time.Time) []TransferEnd { return s.transfers.endedSince(cut) }
