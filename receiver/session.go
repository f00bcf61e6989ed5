package receiver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/petrelmq/petrel/internal/logkey"
	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/queue"
	"github.com/petrelmq/petrel/session"
)

// pending is a run of received packets on its way to its ack: the puts of
// packets up to last, submitted as one store operation, or the refusal of
// one packet.
type pending struct {
	last   uint64    // the highest seq this entry covers
	op     *queue.Op // nil for a refusal
	puts   int
	refuse string
	denied bool // the refusal is an access denial
}

// refusal is why a packet's message is refused for good, if it is.
type refusal struct {
	reason string // empty: not refused
	denied bool   // by the access rules
}

// maxGather caps how many packets that already arrived one store
// operation takes.
const maxGather = 256

// sessionLoop stores what one session carries. It reads Data packets and
// submits their puts (readLoop, this goroutine); ackLoop waits for the
// commits in order and acks cumulatively, while any wait (see pendQueue).
// Sequence numbers must run 1, 2, 3...: a session is new on every
// reconnect, so anything else is a broken peer.
func (s *Server) sessionLoop(c *session.Conn, sess *session.Session) {
	ctx, cancel := s.ctxOf(c)
	defer cancel()
	// The identity is the one the peer proved in the handshake, whatever
	// its SessionCreate says: routing and access rules go by it.
	peer := c.Peer()
	pend := newPendQueue(int(min(s.cfg.Window, maxPending)), func(pend *pendQueue) error {
		err := s.ackLoop(ctx, sess, pend)
		if err != nil {
			cancel() // stop readLoop: nothing it reads could be acked
		}
		return err
	})
	err := s.readLoop(ctx, sess, peer, pend)
	pend.loops.Wait()
	if ackErr := pend.failed(); ackErr != nil && (err == nil || errors.Is(err, context.Canceled)) {
		// A failed commit stops the read loop by cancelling ctx: the
		// commit's error (a full store) is why the session ends, not the
		// cancellation, which would end it without a word to the sender.
		err = ackErr
	}
	if errors.Is(err, errDrained) {
		s.closeDrained(sess)
		return
	}
	switch {
	case err == nil, errors.Is(err, io.EOF), errors.Is(err, context.Canceled), errors.Is(err, session.ErrClosed):
		return
	case errors.Is(err, queue.ErrStoreFull):
		s.endFull(peer, sess, err)
		return
	case isProtocol(err):
		s.stats.ProtocolErrors.Add(1)
	}
	s.log.Warn("session ended", slog.String(logkey.Peer, peer.Name), slog.String(logkey.Address, sess.Address()), slog.Any(logkey.Error, err))
	sess.CloseWithin(err.Error(), 0)
}

// maxPending bounds a session's queue of operations awaiting their commit
// (see pendQueue).
const maxPending = 256

// pendQueue is a session's operations awaiting their commit, one entry per
// store operation or refusal, in sequence order: the read loop pushes
// them, waiting while max are there; the ack loop takes them as commits
// land. Each entry covers at least one packet of the window, usually
// hundreds, so a few hundred are plenty.
//
// The ack loop runs while entries wait: push starts one when none runs,
// and it ends once it has drained them. An idle session holds neither an
// ack loop nor an array of entries; a node that receives thousands of
// idle send queues from its neighbours kept both for each, a goroutine
// and 12 KiB of channel.
type pendQueue struct {
	max   int
	room  chan struct{}          // cap 1: signalled when the ack loop took entries
	ack   func(*pendQueue) error // an ack loop, run in loops
	loops sync.WaitGroup

	mu     sync.Mutex
	items  []pending
	acking bool   // an ack loop runs
	acked  uint64 // the last seq acked, across ack loops
	err    error  // why an ack loop failed
}

func newPendQueue(limit int, ack func(*pendQueue) error) *pendQueue {
	return &pendQueue{max: limit, room: make(chan struct{}, 1), ack: ack}
}

// keptPending is the most entries the array of an idle session's queue
// keeps between bursts: a loop that drains it after each commit reuses
// it rather than grow one every time, and an idle session keeps a few
// hundred bytes, not a burst's array.
const keptPending = 16

// push adds p, waiting while the queue is full, and starts an ack loop if
// none runs.
func (q *pendQueue) push(ctx context.Context, p pending) error {
	for {
		q.mu.Lock()
		if len(q.items) < q.max {
			q.items = append(q.items, p)
			start := !q.acking
			q.acking = true
			q.mu.Unlock()
			if start {
				q.loops.Go(func() {
					if err := q.ack(q); err != nil {
						q.fail(err)
					}
				})
			}
			return nil
		}
		q.mu.Unlock()
		select {
		case <-q.room:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// take hands the ack loop every entry waiting, appended to dst; none
// means the queue is drained, and the loop ends: the next push starts
// another.
func (q *pendQueue) take(dst []pending) []pending {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.items) == 0 {
		q.acking = false
		if cap(q.items) > keptPending {
			q.items = nil
		}
		return dst
	}
	dst = append(dst, q.items...)
	clear(q.items)
	q.items = q.items[:0]
	select {
	case q.room <- struct{}{}:
	default:
	}
	return dst
}

func (q *pendQueue) fail(err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.err = err
}

func (q *pendQueue) failed() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.err
}

// errDrained ends a session that stopped because the server is stopping.
var errDrained = errors.New("node shutting down")

// gatherer is the read side of one session: it checks sequence numbers
// and gathers the puts of the packets that already arrived into one store
// operation, handing each operation, and each refusal, to the ack loop in
// sequence order.
type gatherer struct {
	s    *Server
	ctx  context.Context
	sess *session.Session
	peer session.Peer
	pend *pendQueue
	last uint64      // the last seq taken
	puts []queue.Put // gathered, not yet submitted
	// put checks and routes one packet's message: linkPut for a link,
	// publishPut for a client's publish session.
	put func(ctx context.Context, peer session.Peer, d session.Data) (queue.Put, refusal, error)
}

func (s *Server) readLoop(ctx context.Context, sess *session.Session, peer session.Peer, pend *pendQueue) error {
	g := &gatherer{s: s, ctx: ctx, sess: sess, peer: peer, pend: pend, put: s.linkPut}
	if sess.Publish() {
		g.put = s.publishPut
	}
	rctx, rcancel := s.readCtx(ctx)
	defer rcancel()
	for {
		d, err := sess.Recv(rctx)
		if err != nil && ctx.Err() == nil && s.draining() {
			// Shutting down: what was taken is submitted, and the ack
			// loop acks it once committed.
			if err := g.flush(); err != nil {
				return err
			}
			return errDrained
		}
		for ok := err == nil; ok; d, ok = sess.TryRecv() {
			if err := g.take(d); err != nil {
				return err
			}
			if len(g.puts) >= maxGather {
				break
			}
		}
		if err != nil {
			return err
		}
		if err := g.flush(); err != nil {
			return err
		}
	}
}

// take handles one received packet: it checks its sequence, then gathers
// its put or emits its refusal in order.
func (g *gatherer) take(d session.Data) error {
	g.s.stats.Received.Add(1)
	if d.Seq != g.last+1 {
		return fmt.Errorf("%w: sequence %d after %d (a session's sequence runs 1, 2, 3...)", session.ErrProtocol, d.Seq, g.last)
	}
	put, refusal, err := g.put(g.ctx, g.peer, d)
	if err != nil {
		return err
	}
	if refusal.reason == "" {
		g.last = d.Seq
		g.puts = append(g.puts, put)
		return nil
	}
	// A refusal keeps its place in the sequence: what was gathered
	// before it is submitted first.
	if err := g.flush(); err != nil {
		return err
	}
	g.last = d.Seq
	return g.emit(pending{last: d.Seq, refuse: refusal.reason, denied: refusal.denied})
}

// flush submits the gathered puts as one operation.
func (g *gatherer) flush() error {
	if len(g.puts) == 0 {
		return nil
	}
	op, err := g.s.store.Submit(g.puts)
	if err != nil {
		return err
	}
	n := len(g.puts)
	g.puts = nil // the store keeps the slice until the commit
	return g.emit(pending{last: g.last, op: op, puts: n})
}

func (g *gatherer) emit(p pending) error { return g.pend.push(g.ctx, p) }

// linkPut is put for a link's session.
func (s *Server) linkPut(ctx context.Context, peer session.Peer, d session.Data) (queue.Put, refusal, error) {
	p, reason, err := s.put(ctx, peer, d)
	return p, refusal{reason: reason}, err
}

// put checks one packet's message and routes it. A message refused for
// good comes back as a reason; any error is transient.
func (s *Server) put(ctx context.Context, peer session.Peer, d session.Data) (queue.Put, string, error) {
	// The header is all routing, ordering, expiry and dedupe need; the
	// bytes are stored as they came (the session hands over the payload).
	// PeekValid checks the whole encoding, and what Validate checks
	// besides: a peer stores nothing the node's own Producer would refuse.
	m, err := message.PeekValid(d.Message, s.cfg.Limits)
	if err != nil {
		s.stats.Refused.Add(1)
		return queue.Put{}, "bad message: " + err.Error(), nil
	}
	if reason := s.refuseKind(m); reason != "" {
		return queue.Put{}, reason, nil
	}
	if reason := s.checkOrigin(peer, m, false); reason != "" {
		s.stats.Refused.Add(1)
		return queue.Put{}, reason, nil
	}
	if s.icpt != nil {
		var reason string
		if m, d.Message, reason, err = s.interceptPublish(ctx, peer, d.Message, false); reason != "" || err != nil {
			return queue.Put{}, reason, err
		}
	}
	q, err := s.router.Inbound(ctx, peer, m)
	if errors.Is(err, ErrRefused) {
		s.stats.Refused.Add(1)
		return queue.Put{}, err.Error(), nil
	}
	if err != nil {
		return queue.Put{}, "", err
	}
	return queue.Put{Queue: q, Msg: m, Data: d.Message, Dedupe: true}, "", nil
}

// ackLoop acks committed puts in sequence order, until pend is drained.
// It takes every entry waiting, waits for each in turn, then sends one
// cumulative DataAck: one ack per group commit, not per packet.
func (s *Server) ackLoop(ctx context.Context, sess *session.Session, pend *pendQueue) error {
	var batch []pending
	for {
		batch = pend.take(batch[:0])
		if len(batch) == 0 {
			return nil
		}
		var done uint64
		for _, p := range batch {
			if err := s.settle(ctx, sess, p); err != nil {
				// What committed before the failure is acked first, so
				// that its sender does not send it again, and a client is
				// not told that it failed.
				if done > pend.acked && sess.Ack(done) == nil {
					pend.acked = done
				}
				return err
			}
			done = p.last
		}
		// Only this loop touches acked, and one runs at a time; the
		// next one starts after this one's last take.
		if done > pend.acked {
			if err := sess.Ack(done); err != nil {
				return err
			}
			pend.acked = done
		}
	}
}

// settle waits for one pending entry: its commit, or its refusal sent.
func (s *Server) settle(ctx context.Context, sess *session.Session, p pending) error {
	if p.op == nil && p.denied {
		return sess.DenySeq(p.last, p.refuse)
	}
	if p.op == nil {
		return sess.RefuseSeq(p.last, p.refuse)
	}
	if err := p.op.Wait(ctx); err != nil {
		return fmt.Errorf("store packets up to %d: %w", p.last, err)
	}
	for i := range p.puts {
		if p.op.Deduped(i) {
			s.stats.Deduped.Add(1)
		} else {
			s.stats.Stored.Add(1)
		}
	}
	return nil
}
