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

// transfers is the server's registry of files in progress: what the
// status shows. A paused entry stays until the file is taken or its
// sender starts again.
type transfers struct {
	mu sync.Mutex
	m  map[string]*transfer
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
