package queue

import (
	"context"

	"github.com/petrelmq/petrel/message"
)

// Op is the completion handle of an asynchronous store operation. Done is
// closed once the operation committed or failed; Err then says which.
// An Op is safe to wait on from several goroutines.
type Op struct {
	done    chan struct{}
	err     error
	deduped []bool
}

func newOp() *Op { return &Op{done: make(chan struct{})} }

func (o *Op) finish(err error) {
	o.err = err
	close(o.done)
}

// Done is closed when the operation has committed or failed.
func (o *Op) Done() <-chan struct{} { return o.done }

// Err returns the operation's error once Done is closed, nil before.
func (o *Op) Err() error {
	select {
	case <-o.done:
		return o.err
	default:
		return nil
	}
}

// Wait blocks until the operation is durable or failed, or ctx is done. A
// ctx error says nothing about the operation: it may still commit.
func (o *Op) Wait(ctx context.Context) error {
	select {
	case <-o.done:
		return o.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Deduped reports, once Done is closed, whether the i-th put of the
// operation was dropped as a duplicate.
func (o *Op) Deduped(i int) bool {
	select {
	case <-o.done:
		return i < len(o.deduped) && o.deduped[i]
	default:
		return false
	}
}

// Put is one message to store in a queue.
type Put struct {
	Queue *Queue
	Msg   *message.Message
	// Data is Msg encoded. When nil, Submit encodes Msg. Every put is
	// stored as a body and a copy of it in its queue; puts of one Submit
	// that share the same Data (one slice) share one body. The store and
	// its consumers only read Data.
	Data []byte
	// Dedupe drops the put, successfully, when (Msg.Origin, Msg.ID) was
	// already accepted into Queue within the dedupe window. Puts of locally
	// made messages need not dedupe: their ids are unique by construction.
	Dedupe bool
	// Optional skips the put, successfully, when Queue was dropped before
	// the commit (a topic's copy for a subscription that ended meanwhile)
	// or holds its depth bound (Queue.SetMaxDepth). Without it, such a put
	// fails the whole operation, and the bound does not apply.
	Optional bool
}

type reqKind uint8

const (
	reqPut reqKind = iota + 1
	reqAck
	reqUpdate
	reqMove
	reqExpire
	reqMeta
	reqCreateQueue
	reqPrune
	reqNoop
	reqPurge    // delete every row of q not in flight; see Queue.Purge
	reqMoveRows // move rows of q to other queues; see Queue.Move
	reqDrop     // delete q and everything of it; see Store.Drop
)

// ref names one stored row of a queue: a row of messages, or, when body
// is not 0, a copy referring to that shared body. size is its data's
// length, for the counters.
type ref struct {
	rowid int64
	prio  uint8
	body  int64
	size  int64
}

// refOf returns the ref of an entry of priority prio.
func refOf(e entry, prio uint8) ref {
	return ref{rowid: e.rowid, prio: prio, body: e.body, size: int64(len(e.data))}
}

// request is one unit of work for the writer. Fields are used per kind.
type request struct {
	kind  reqKind
	op    *Op // nil for fire-and-forget requests
	puts  []Put
	q     *Queue
	ref   ref    // the row of reqUpdate, reqMove, reqExpire and a single reqAck
	to    *Queue // reqMove target; reqExpire expiry address or nil
	name  string // reqMeta key, reqCreateQueue name, reqMove reason, reqPut's meta key (SubmitMarked)
	data  []byte // reqMeta value, reqPut's meta value
	qkind Kind
	// gathered marks a reqAck that takes the acks its queue gathered;
	// taken says it took them, into acks.
	gathered, taken bool
	deliv           int      // reqUpdate
	notBf           int64    // reqUpdate
	dlq             bool     // reqMove: counts as dead-lettered (else expired)
	overflow        bool     // reqMoveRows: the deletes count as overflowed
	acks            []ackRow // reqAck of many rows (AckAll); else ref
	moves           []Move   // reqMoveRows
	// settle marks a request that settles leases of q (an ack, a move
	// to the dead-letter queue): their rows are settledRows.
	settle bool
	// n is set by reqPurge and reqMoveRows to the rows they removed from
	// q, before op finishes.
	n int
}

// settledRows calls f with the row of each lease r settles: its acks,
// or its one row.
func (r *request) settledRows(f func(rowid int64)) {
	if r.acks != nil || r.gathered {
		for _, a := range r.acks {
			f(a.ref.rowid)
		}
		return
	}
	f(r.ref.rowid)
}
