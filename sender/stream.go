package sender

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/petrelmq/petrel/internal/logkey"
	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/queue"
	"github.com/petrelmq/petrel/session"
)

// closeWait bounds a sender's orderly close of a session: what the close
// would settle is already settled or released, so the sender does not wait
// the whole handshake timeout for a next hop that does not answer.
const closeWait = time.Second

// flight is the window of one session: deliveries sent and not yet acked,
// in sequence order. Sequences are consecutive, so seq maps to an index.
// bytes counts their messages' encoded bytes, which the window bounds too
// (Config.WindowBytes); room is signalled when they go down.
type flight struct {
	mu    sync.Mutex
	first uint64 // seq of ds[0]
	ds    []*queue.Delivery
	bytes int64
	room  chan struct{}
	st    *status
	// acking says an ack loop runs: one does while anything is in
	// flight, and none while nothing is (see stream).
	acking bool
}

func newFlight(st *status) *flight { return &flight{room: make(chan struct{}, 1), st: st} }

func (f *flight) push(seq uint64, d *queue.Delivery) {
	f.mu.Lock()
	if len(f.ds) == 0 {
		f.first = seq
	}
	f.ds = append(f.ds, d)
	f.bytes += int64(len(d.Data))
	f.mu.Unlock()
	f.st.inFlightBytes.Add(int64(len(d.Data)))
}

// settled takes the bytes of ds out of the flight; f.mu is held.
func (f *flight) settled(ds ...*queue.Delivery) {
	var n int64
	for _, d := range ds {
		if d != nil {
			n += int64(len(d.Data))
		}
	}
	if n == 0 {
		return
	}
	f.bytes -= n
	f.st.inFlightBytes.Add(-n)
	select {
	case f.room <- struct{}{}:
	default:
	}
}

// waitRoom blocks while the flight holds limit bytes or more, the window
// full as of now(). Under it, the next message goes whatever its size: a
// message larger than the bound still goes, alone. It reports false once
// ctx ends.
func (f *flight) waitRoom(ctx context.Context, limit int64, now func() time.Time) bool {
	for {
		f.mu.Lock()
		b := f.bytes
		f.mu.Unlock()
		if b < limit {
			return true
		}
		f.st.windowFull(now())
		select {
		case <-f.room:
		case <-ctx.Done():
			return false
		}
	}
}

// startAcking reports whether the caller, which just pushed a delivery,
// must start the ack loop: none runs.
func (f *flight) startAcking() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	start := !f.acking
	f.acking = true
	return start
}

// stopAcking reports whether the ack loop, which just settled a batch,
// must end: nothing is in flight but refused deliveries' places, which
// the next cumulative ack clears. A delivery pushed after it starts
// another.
func (f *flight) stopAcking() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, d := range f.ds {
		if d != nil {
			return false
		}
	}
	f.acking = false
	return true
}

// upTo removes and returns the deliveries with seq <= to. Refused ones
// come back nil.
func (f *flight) upTo(to uint64) []*queue.Delivery {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.ds) == 0 || to < f.first {
		return nil
	}
	n := len(f.ds)
	if d := to - f.first; d < uint64(n) {
		n = int(d) + 1
	}
	out := append([]*queue.Delivery(nil), f.ds[:n]...)
	f.settled(out...)
	clear(f.ds[:n])
	f.ds = f.ds[n:]
	if len(f.ds) == 0 {
		// Drop the array: a window's worth of it, per send queue, idle
		// or not.
		f.ds = nil
	}
	f.first += uint64(n)
	return out
}

// take removes the delivery of one seq, leaving a nil in its place.
func (f *flight) take(seq uint64) *queue.Delivery {
	f.mu.Lock()
	defer f.mu.Unlock()
	if seq < f.first || seq-f.first >= uint64(len(f.ds)) {
		return nil
	}
	i := seq - f.first
	d := f.ds[i]
	f.ds[i] = nil
	f.settled(d)
	return d
}

// stream sends the queue on sess until the session or ctx ends. One
// goroutine (this one) leases and sends; ackLoop settles what the next hop
// acked or refused, while anything is in flight; probeLoop, on a failover
// backup only, returns to the main. When the session ends, what is still
// in flight goes back to the queue, to be sent again in its order on the
// next session.
//
// An idle send queue is this goroutine alone, waiting for a message: the
// ack loop starts with the first message in flight and ends when none is,
// and the session's end, when the queue is idle, cancels the wait through
// Session.AfterEnd. A node with thousands of idle send queues kept an ack
// loop waiting for each.
func (s *Sender) stream(ctx context.Context, conn *session.Conn, sess *session.Session, hop string) error {
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stopEnd := sess.AfterEnd(func() { cancel(endCause(conn, sess)) })
	defer stopEnd()
	fl := newFlight(&s.st)
	// The window the receiver agreed to, which may be smaller than ours.
	slots := make(chan struct{}, max(int(sess.Window()), 1))
	var wg sync.WaitGroup
	acks := func() { wg.Go(func() { s.ackLoop(conn, sess, fl, slots, cancel) }) }
	if s.pool.OnBackup(hop) {
		// A connection stays on the connector it was dialled on, so a
		// session that starts on the main one never needs the probe; not
		// running it keeps an idle send queue at one goroutine less.
		wg.Go(func() { s.probeLoop(sctx, hop) })
	}
	err := s.sendLoop(sctx, sess, fl, slots, acks)
	cancel(err)
	// The ack loop ends when the session does; make sure it does.
	sess.CloseWithin("sender stopping or link reset", closeWait)
	wg.Wait()
	released := 0
	for _, d := range fl.upTo(^uint64(0)) {
		if d != nil {
			d.Release()
			released++
		}
	}
	s.st.inFlight.Add(-int64(released))
	if cause := context.Cause(sctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return err
}

// sendLoop leases and sends until ctx ends or a send fails; acks starts
// the ack loop, which it does when it puts a delivery in a flight that
// has none running.
func (s *Sender) sendLoop(ctx context.Context, sess *session.Session, fl *flight, slots chan struct{}, acks func()) error {
	var seq uint64
	for {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		if len(slots) == cap(slots) {
			s.st.windowFull(s.cfg.Now())
		}
		if !fl.waitRoom(ctx, s.cfg.WindowBytes, s.cfg.Now) {
			<-slots
			return context.Cause(ctx)
		}
		d, err := s.q.Receive(ctx)
		if err != nil {
			<-slots
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			return fmt.Errorf("lease from %s: %w", s.q.Name(), err)
		}
		if message.EncodedKind(d.Data) == message.KindFile {
			// Its content goes first, on a file session of its own: the
			// messages behind it do not wait for it.
			<-slots
			if err := s.handOff(ctx, d); err != nil {
				return err
			}
			continue
		}
		data, ok := s.prepare(d)
		if !ok {
			// Expired since it was polled: the queue expires it on the
			// next poll.
			d.Release()
			<-slots
			continue
		}
		seq++
		fl.push(seq, d)
		if fl.startAcking() {
			acks()
		}
		s.st.inFlight.Add(1)
		if err := sess.SendData(ctx, seq, data); err != nil {
			return fmt.Errorf("send packet %d: %w", seq, err)
		}
		s.st.sent.Add(1)
	}
}

// ackLoop settles acks and refusals until nothing is in flight, or until
// the session ends, when it cancels the stream.
func (s *Sender) ackLoop(conn *session.Conn, sess *session.Session, fl *flight, slots chan struct{}, cancel context.CancelCauseFunc) {
	var batch []session.Ack
	for {
		var ok bool
		batch, ok = sess.TakeAcks(batch[:0])
		if len(batch) > 0 {
			s.settle(fl, slots, batch)
		}
		if !ok {
			cancel(endCause(conn, sess))
			return
		}
		if fl.stopAcking() {
			return
		}
	}
}

// endCause says why a stream's session ended: its connection's error if
// the connection died (set before the connection ends its sessions),
// else the session's end, with the next hop's reason. A full store at the
// next hop says so first: it is what an operator looks for in the link's
// last error, and it passes once the next hop has room.
func endCause(conn *session.Conn, sess *session.Session) error {
	if err := conn.Err(); err != nil {
		return fmt.Errorf("connection to %s lost: %w", conn.Peer().Name, err)
	}
	err := sess.Err()
	switch {
	case errors.Is(err, session.ErrFull):
		return fmt.Errorf("store full at %s, sending again after a backoff: %w", conn.Peer().Name, err)
	case err != nil:
		return fmt.Errorf("%w: %w", errSessionEnded, err)
	}
	return errSessionEnded
}

// settle applies a batch of acks and refusals, in arrival order. The
// messages that the batch's cumulative acks cover are acked at the queue
// in one store request.
func (s *Sender) settle(fl *flight, slots chan struct{}, batch []session.Ack) {
	now := s.cfg.Now()
	var settled []*queue.Delivery
	cumulative := false
	for _, a := range batch {
		if a.Refused {
			if d := fl.take(a.Seq); d != nil {
				s.st.refused.Add(1)
				s.st.inFlight.Add(-1)
				<-slots
				if err := d.DeadLetter("refused by the next hop: " + a.Reason); err != nil {
					s.log.Warn("dead-letter refused message failed", logkey.Error, err)
				}
			}
			continue
		}
		cumulative = true
		for _, d := range fl.upTo(a.Seq) {
			if d == nil {
				continue // refused earlier
			}
			<-slots
			settled = append(settled, d)
		}
	}
	if !cumulative {
		return
	}
	s.st.inFlight.Add(-int64(len(settled)))
	s.st.acked.Add(int64(len(settled)))
	// One store request for everything the batch covers.
	if err := s.q.AckAll(settled); err != nil && !errors.Is(err, queue.ErrClosed) {
		s.log.Warn("ack of forwarded messages failed", logkey.Error, err)
	}
	s.st.ackedAt(now)
}

// errSessionEnded is the cause of a stream's end when its session ended.
var errSessionEnded = errors.New("session closed by the next hop")

// probeLoop checks, while the link runs on a failover backup, whether the
// main connector is back; if it is, the pool moves the link there.
func (s *Sender) probeLoop(ctx context.Context, hop string) {
	t := time.NewTicker(s.cfg.MainProbe)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if s.pool.OnBackup(hop) {
				s.pool.TryMain(ctx, hop)
			}
		}
	}
}
