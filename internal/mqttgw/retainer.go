package mqttgw

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/mochi-mqtt/server/v2/packets"
)

// retainBatch is the most retained messages one transaction of the
// session store takes.
const retainBatch = 512

// retainer stores retained messages in the session store and puts them
// in mochi's index, in the order they were handed to it, many to a
// transaction. One transaction per message held a client publishing
// retained messages to what one commit a message allows (about 1,400 a
// second here, where mosquitto takes tens of thousands); a connection
// now goes on reading while the retainer commits, and its next retained
// publishes share the next commit.
//
// A retained message enters mochi's index only once it is stored, and
// after the node committed the publish it came with: a publish the node
// refused is never retained. A subscription waits, before mochi sends it
// the retained messages (OnSubscribed), until what was handed to the
// retainer before it is in the index (barrier): a client that publishes
// a retained message and then subscribes gets it back, as from
// mosquitto, whose index is updated as the publish is read.
type retainer struct {
	g    *Gateway
	jobs chan *retainJob
	// sendMu orders the jobs: queued is taken and the job sent under it,
	// so that the nth job sent is the nth applied.
	sendMu sync.Mutex
	queued atomic.Uint64
	// applied counts the jobs done, in order; changed is closed and
	// replaced each time it grows.
	mu      sync.Mutex
	applied uint64
	changed chan struct{}
	// stop asks run to finish what is queued and return; stopped is
	// closed once it returned.
	stop, stopped chan struct{}
	stopOnce      sync.Once
	// commits counts the transactions that stored retained messages.
	commits atomic.Int64
}

// retainJob is one retained message handed to the retainer. It is a
// Commit: done once the message is stored and in the index, or refused.
type retainJob struct {
	pk packets.Packet
	// after is the node's commit of the publish the message came with,
	// nil when there is none (a retained message from another site).
	after Commit
	// release gives back what reserveRetained held for it.
	release func()
	done    chan struct{}
	err     error
}

func (j *retainJob) Done() <-chan struct{} { return j.done }
func (j *retainJob) Err() error            { return j.err }

func newRetainer(g *Gateway) *retainer {
	return &retainer{g: g, jobs: make(chan *retainJob, retainBatch), changed: make(chan struct{}),
		stop: make(chan struct{}), stopped: make(chan struct{})}
}

// add hands pk to the retainer, to be stored once after is committed.
// release, if not nil, is called once it is done with. It blocks while
// retainBatch messages wait already, and returns ErrClosed once the
// retainer stopped.
func (r *retainer) add(pk packets.Packet, after Commit, release func()) (*retainJob, error) {
	j := &retainJob{pk: pk, after: after, release: release, done: make(chan struct{})}
	r.sendMu.Lock()
	defer r.sendMu.Unlock()
	select {
	case <-r.stop:
		return nil, ErrClosed
	default:
	}
	select {
	case r.jobs <- j:
		r.queued.Add(1)
		return j, nil
	case <-r.stop:
		return nil, ErrClosed
	}
}

// barrier waits until every message handed to the retainer before the
// call is stored and in the index, or refused; or ctx ends, or the
// retainer stopped.
func (r *retainer) barrier(ctx context.Context) error {
	n := r.queued.Load()
	for {
		r.mu.Lock()
		applied, changed := r.applied, r.changed
		r.mu.Unlock()
		if applied >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		case <-r.stopped:
			return ErrClosed
		}
	}
}

// run stores what is handed to it until close, then what is left.
func (r *retainer) run() {
	defer close(r.stopped)
	batch := make([]*retainJob, 0, retainBatch)
	for {
		var j *retainJob
		select {
		case j = <-r.jobs:
		case <-r.stop:
			// add sends nothing once stop is closed and sendMu taken:
			// what is in the channel now is all there will be.
			r.sendMu.Lock()
			r.sendMu.Unlock() //nolint:staticcheck // waits for a send under way
			select {
			case j = <-r.jobs:
			default:
				return
			}
		}
		batch = append(batch[:0], j)
	fill:
		for len(batch) < retainBatch {
			select {
			case j := <-r.jobs:
				batch = append(batch, j)
			default:
				break fill
			}
		}
		r.write(batch)
	}
}

// write stores batch in one transaction, those of its messages whose
// publish the node committed, then puts them in the index in order.
func (r *retainer) write(batch []*retainJob) {
	g := r.g
	pks := make([]packets.Packet, 0, len(batch))
	for _, j := range batch {
		if j.after != nil {
			if err := waitCommit(g.ctx, j.after); err != nil {
				j.err = err
				continue
			}
		}
		pks = append(pks, j.pk)
	}
	var err error
	if len(pks) > 0 {
		err = g.store.setRetainedAll(g.ctx, pks)
		r.commits.Add(1)
	}
	for _, j := range batch {
		if j.err == nil && err != nil {
			j.err = &Refusal{Code: CodeUnspecified, Reason: "retained message not stored: " + err.Error()}
		}
		if j.err == nil {
			g.indexRetained(j.pk)
		} else if j.pk.FixedHeader.Qos == 0 {
			// Nobody waits for the answer of a QoS 0 publish.
			if held, ok := g.refusedLog.Allow("\x00retained"); ok {
				g.log.Warn("mqtt retained message not kept", slog.String("topic", clip(j.pk.TopicName)),
					slog.Any("error", j.err), slog.Int64("suppressed", held))
			}
		}
		if j.release != nil {
			j.release()
		}
		close(j.done)
	}
	r.mu.Lock()
	r.applied += uint64(len(batch))
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
}

// close stores what was handed to the retainer and stops it. Later adds
// return ErrClosed.
func (r *retainer) close() {
	r.stopOnce.Do(func() { close(r.stop) })
	<-r.stopped
}
