package receiver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

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
// commits in order and acks cumulatively. Sequence numbers must run 1, 2,
// 3...: a session is new on every reconnect, so anything else is a broken
// peer.
func (s *Server) sessionLoop(c *session.Conn, sess *session.Session) {
	ctx, cancel := s.ctxOf(c)
	defer cancel()
	// The identity is the one the peer proved in the handshake, whatever
	// its SessionCreate says: routing and access rules go by it.
	peer := c.Peer()
	// One entry per store operation or refusal, in sequence order; the
	// read loop waits when it is full, the ack loop drains it as commits
	// land. Each entry covers at least one packet of the window, usually
	// hundreds, so a few hundred are plenty; a channel the size of the
	// window would be allocated whole for every session, idle or not.
	pend := make(chan pending, min(s.cfg.Window, maxPending))
	ackDone := make(chan error, 1)
	go func() {
		err := s.ackLoop(ctx, sess, pend)
		if err != nil {
			cancel() // stop readLoop: nothing it reads could be acked
		}
		ackDone <- err
	}()
	err := s.readLoop(ctx, sess, peer, pend)
	close(pend)
	ackErr := <-ackDone
	if err == nil {
		err = ackErr
	}
	if errors.Is(err, errDrained) {
		s.closeDrained(sess)
		return
	}
	switch {
	case err == nil, errors.Is(err, io.EOF), errors.Is(err, context.Canceled), errors.Is(err, session.ErrClosed):
		return
	case isProtocol(err):
		s.stats.ProtocolErrors.Add(1)
	}
	s.log.Warn("session ended", slog.String(logkey.Peer, peer.Name), slog.String(logkey.Address, sess.Address()), slog.Any(logkey.Error, err))
	sess.CloseWithin(err.Error(), 0)
}

// maxPending bounds a session's queue of operations awaiting their commit
// (see sessionLoop).
const maxPending = 256

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
	pend chan<- pending
	last uint64      // the last seq taken
	puts []queue.Put // gathered, not yet submitted
	// put checks and routes one packet's message: linkPut for a link,
	// publishPut for a client's publish session.
	put func(ctx context.Context, peer session.Peer, d session.Data) (queue.Put, refusal, error)
}

func (s *Server) readLoop(ctx context.Context, sess *session.Session, peer session.Peer, pend chan<- pending) error {
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

func (g *gatherer) emit(p pending) error {
	select {
	case g.pend <- p:
		return nil
	case <-g.ctx.Done():
		return g.ctx.Err()
	}
}

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
	// Peek checks the whole encoding.
	m, err := message.Peek(d.Message, s.cfg.Limits)
	if err != nil {
		s.stats.Refused.Add(1)
		return queue.Put{}, "bad message: " + err.Error(), nil
	}
	if reason := s.refuseKind(m); reason != "" {
		return queue.Put{}, reason, nil
	}
	if reason := s.checkOrigin(peer, m, false); reason != "" {
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

// ackLoop acks committed puts in sequence order. After each wait it takes
// every following put that is already committed, then sends one cumulative
// DataAck: one ack per group commit, not per packet.
func (s *Server) ackLoop(ctx context.Context, sess *session.Session, pend <-chan pending) error {
	var acked, done uint64
	for p := range pend {
		if err := s.settle(ctx, sess, p); err != nil {
			return err
		}
		done = p.last
	more:
		for {
			select {
			case p, ok := <-pend:
				if !ok {
					break more
				}
				if err := s.settle(ctx, sess, p); err != nil {
					return err
				}
				done = p.last
			default:
				break more
			}
		}
		if done > acked {
			if err := sess.Ack(done); err != nil {
				return err
			}
			acked = done
		}
	}
	return nil
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
