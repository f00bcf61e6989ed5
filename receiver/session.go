package receiver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

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
	peer := sess.Peer()
	pend := make(chan pending, s.cfg.Window)
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
	switch {
	case err == nil, errors.Is(err, io.EOF), errors.Is(err, context.Canceled), errors.Is(err, session.ErrClosed):
		return
	case isProtocol(err):
		s.stats.ProtocolErrors.Add(1)
	}
	s.log.Warn("session ended", slog.String(logPeer, peer.Name), slog.String(logAddress, sess.Address()), slog.Any(logError, err))
	closeCtx, cc := context.WithTimeout(context.Background(), s.cfg.Session.HandshakeTimeout)
	defer cc()
	sess.Close(closeCtx, err.Error())
}

func (s *Server) readLoop(ctx context.Context, sess *session.Session, peer session.Peer, pend chan<- pending) error {
	var last uint64
	var puts []queue.Put
	emit := func(p pending) error {
		select {
		case pend <- p:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	// flush submits the gathered puts as one operation.
	flush := func() error {
		if len(puts) == 0 {
			return nil
		}
		op, err := s.store.Submit(puts)
		if err != nil {
			return err
		}
		n := len(puts)
		puts = nil // the store keeps the slice until the commit
		return emit(pending{last: last, op: op, puts: n})
	}
	for {
		d, err := sess.Recv(ctx)
		if err != nil {
			return err
		}
		for {
			if err := s.take(ctx, peer, d, &last, &puts, flush, emit); err != nil {
				return err
			}
			var ok bool
			if len(puts) >= maxGather {
				break
			}
			if d, ok = sess.TryRecv(); !ok {
				break
			}
		}
		if err := flush(); err != nil {
			return err
		}
	}
}

// take handles one received packet: it checks its sequence, then gathers
// its put or emits its refusal in order.
func (s *Server) take(ctx context.Context, peer session.Peer, d session.Data, last *uint64, puts *[]queue.Put, flush func() error, emit func(pending) error) error {
	s.stats.Received.Add(1)
	if d.Seq != *last+1 {
		return fmt.Errorf("%w: sequence %d after %d (a session's sequence runs 1, 2, 3...)", session.ErrProtocol, d.Seq, *last)
	}
	put, refusal, err := s.put(ctx, peer, d)
	if err != nil {
		return err
	}
	if refusal == "" {
		*last = d.Seq
		*puts = append(*puts, put)
		return nil
	}
	// A refusal keeps its place in the sequence: what was gathered
	// before it is submitted first.
	if err := flush(); err != nil {
		return err
	}
	*last = d.Seq
	return emit(pending{last: d.Seq, refuse: refusal})
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
