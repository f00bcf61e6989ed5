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

// pending is one received packet on its way to its ack: either a put whose
// commit is awaited, or a refusal to report.
type pending struct {
	seq    uint64
	op     *queue.Op
	refuse string
}

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
	for {
		d, err := sess.Recv(ctx)
		if err != nil {
			return err
		}
		s.stats.Received.Add(1)
		if d.Seq != last+1 {
			return fmt.Errorf("%w: sequence %d after %d (a session's sequence runs 1, 2, 3...)", session.ErrProtocol, d.Seq, last)
		}
		last = d.Seq
		p, err := s.put(ctx, peer, d)
		if err != nil {
			return err
		}
		select {
		case pend <- p:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// put validates one message and submits it to the group commit.
func (s *Server) put(ctx context.Context, peer session.Peer, d session.Data) (pending, error) {
	// The header is all routing, ordering, expiry and dedupe need; the
	// bytes are stored as they came. Peek checks the whole encoding.
	m, err := message.Peek(d.Message, s.cfg.Limits)
	if err != nil {
		s.stats.Refused.Add(1)
		return pending{seq: d.Seq, refuse: "bad message: " + err.Error()}, nil
	}
	q, err := s.router.Inbound(ctx, peer, m)
	if errors.Is(err, ErrRefused) {
		s.stats.Refused.Add(1)
		return pending{seq: d.Seq, refuse: err.Error()}, nil
	}
	if err != nil {
		return pending{}, err
	}
	// The store keeps the bytes; the session reuses its read buffer.
	data := append([]byte(nil), d.Message...)
	op, err := s.store.Submit([]queue.Put{{Queue: q, Msg: m, Data: data, Dedupe: true}})
	if err != nil {
		return pending{}, err
	}
	return pending{seq: d.Seq, op: op}, nil
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
		done = p.seq
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
				done = p.seq
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

// settle waits for one pending packet: its commit, or its refusal sent.
func (s *Server) settle(ctx context.Context, sess *session.Session, p pending) error {
	if p.op == nil {
		return sess.RefuseSeq(p.seq, p.refuse)
	}
	if err := p.op.Wait(ctx); err != nil {
		return fmt.Errorf("store packet %d: %w", p.seq, err)
	}
	if p.op.Deduped(0) {
		s.stats.Deduped.Add(1)
	} else {
		s.stats.Stored.Add(1)
	}
	return nil
}
