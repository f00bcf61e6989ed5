package petrel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/petrelmq/petrel/internal/logkey"
	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/session"
)

// publisher is a Client's producing side: one publish session, and the
// messages sent on it that the node has not yet confirmed durable.
//
// flight holds them in order. The first sent of them are on the current
// session, with the sequence numbers first, first+1, ...; the rest wait,
// because the node's window is full or the connection is down. A
// cumulative DataAck completes a prefix; a Refuse completes one message
// with an error and leaves a placeholder until the DataAck passes it.
// After a reconnect, what is left is sent again from sequence 1, and the
// node's dedupe drops what it had stored already.
//
// The node may end the publish session while the connection stays up: when
// its store has no room (session.ErrFull), the messages sent on the
// session and not acked fail with ErrStoreFull, so that Send says so at
// once rather than wait for room that may never come. The publisher then
// opens another session on the connection, after a short wait, for the
// messages that wait and those sent later.
type publisher struct {
	stamper // create, stamp
	c       *Client
	limit   int   // the most messages in flight: DialOptions.Window
	bytes   int64 // the most bytes they hold: DialOptions.WindowBytes

	mu     sync.Mutex
	conn   *session.Conn    // the connection sess is on; nil while it is down
	sess   *session.Session // nil while the connection is down, or until the session ended is opened again
	window int              // the session's: the most sent and not acked
	first  uint64           // seq of flight[0], if sent
	sent   int              // flight[:sent] are on sess
	flight []*pubReq
	held   int64         // the bytes of flight's messages, counted until they leave it
	space  chan struct{} // closed when flight shrinks; nil when no one waits
	err    error         // set when the client closed
}

// pubReq is one message in flight and its completion.
type pubReq struct {
	data    []byte
	size    int64 // len(data), counted in publisher.held while in flight
	dest    string
	done    chan struct{}
	err     error
	settled bool // under publisher.mu
}

// Done, Err and Wait make a pubReq the completion of a remote SendAsync.
func (r *pubReq) Done() <-chan struct{} { return r.done }

func (r *pubReq) Err() error {
	select {
	case <-r.done:
		return r.err
	default:
		return nil
	}
}

func (r *pubReq) Wait(ctx context.Context) error {
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// newPublisher returns the publisher of c. Its messages' origin is the
// client's id, and time.Now the clock of their timestamps and ids: the ids
// need not survive a restart, since a new Dial has a new id, or a fixed
// one whose ids follow the clock (see DialOptions.ID).
func newPublisher(c *Client) *publisher {
	st := stamper{origin: c.opts.ID, ids: message.NewIDGen(0, 0, nil, time.Now), now: time.Now}
	return &publisher{stamper: st, c: c, limit: c.opts.Window, bytes: c.opts.WindowBytes}
}

// send is Producer.Send for a remote producer.
func (p *publisher) send(ctx context.Context, m *message.Message) error {
	r, err := p.submit(ctx, m)
	if err != nil {
		return err
	}
	return r.Wait(ctx)
}

// sendAsync is Producer.SendAsync for a remote producer.
func (p *publisher) sendAsync(m *message.Message) *Pending {
	r, err := p.submit(context.Background(), m)
	if err != nil {
		return failed(err)
	}
	return &Pending{c: r}
}

// submit checks and encodes m, waits for room in the window, and sends it
// (or queues it until the connection is back).
func (p *publisher) submit(ctx context.Context, m *message.Message) (*pubReq, error) {
	if err := p.prepare(m); err != nil {
		return nil, err
	}
	data, err := m.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("send to %q: %w", m.Destination, err)
	}
	r := &pubReq{data: data, size: int64(len(data)), dest: m.Destination, done: make(chan struct{})}
	if err := p.enqueue(ctx, r); err != nil {
		return nil, err
	}
	return r, nil
}

// prepare stamps and validates m.
func (p *publisher) prepare(m *message.Message) error {
	if m.Kind == message.KindFile {
		return fmt.Errorf("send to %q: a remote client cannot send file messages (the node would have to read the file); use petrel sendfile or an outbox on the node", m.Destination)
	}
	if err := p.stamp(m); err != nil {
		return err
	}
	if err := m.Validate(p.c.opts.Limits); err != nil {
		return fmt.Errorf("send to %q: %w", m.Destination, err)
	}
	return nil
}

// enqueue adds r to the flight, waiting while it is full (in messages, or
// in bytes unless it is empty), and sends what the window allows.
func (p *publisher) enqueue(ctx context.Context, r *pubReq) error {
	for {
		p.mu.Lock()
		if p.err != nil {
			err := p.err
			p.mu.Unlock()
			return err
		}
		if len(p.flight) < p.limit && (p.held+r.size <= p.bytes || len(p.flight) == 0) {
			p.flight = append(p.flight, r)
			p.held += r.size
			p.pump()
			p.mu.Unlock()
			return nil
		}
		if p.space == nil {
			p.space = make(chan struct{})
		}
		space := p.space
		p.mu.Unlock()
		select {
		case <-space:
		case <-ctx.Done():
			return ctx.Err()
		case <-p.c.ctx.Done():
			return fmt.Errorf("send to %q: client closed: %w", r.dest, ErrClosed)
		}
	}
}

// pump sends the waiting messages the session's window has room for;
// p.mu is held. A send that fails leaves the message waiting: the session
// is ending, and the next one sends it again.
func (p *publisher) pump() {
	for p.sess != nil && p.sent < len(p.flight) && p.sent < p.window {
		r := p.flight[p.sent]
		if !r.settled {
			// Holding p.mu while the connection's write queue is full
			// makes the other producers wait, as they would anyway.
			if err := p.sess.SendData(context.Background(), p.first+uint64(p.sent), r.data); err != nil {
				return
			}
		}
		p.sent++
	}
}

// attach opens the publish session on conn, the client's new connection,
// and sends again everything in flight, renumbered from 1.
func (p *publisher) attach(conn *session.Conn) error {
	sess, err := p.open(conn)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.conn = conn
	p.install(sess)
	p.mu.Unlock()
	p.c.wg.Go(func() { p.serve(conn, sess) })
	return nil
}

func (p *publisher) open(conn *session.Conn) (*session.Session, error) {
	ctx, cancel := context.WithTimeout(p.c.ctx, p.c.opts.HandshakeTimeout)
	defer cancel()
	sess, err := conn.OpenPublish(ctx, uint32(p.limit))
	if err != nil {
		return nil, fmt.Errorf("open publish session: %w", remoteErr(err))
	}
	return sess, nil
}

// install makes sess the publish session, and sends on it what is in
// flight and not settled, renumbered from 1; p.mu is held.
func (p *publisher) install(sess *session.Session) {
	kept := p.flight[:0]
	for _, r := range p.flight {
		if !r.settled {
			kept = append(kept, r)
		} else {
			p.held -= r.size
		}
	}
	clear(p.flight[len(kept):])
	if len(kept) < len(p.flight) && p.space != nil {
		close(p.space)
		p.space = nil
	}
	p.flight = kept
	p.sess, p.window, p.first, p.sent = sess, int(sess.Window()), 1, 0
	p.pump()
}

// detach forgets the session of a lost connection; what was sent on it
// waits for the next one.
func (p *publisher) detach() {
	p.mu.Lock()
	p.conn, p.sess, p.sent = nil, nil, 0
	p.mu.Unlock()
}

// serve runs the acks of sess, on conn, and each time the node ends the
// session while conn is up, opens another, until conn or the client ends.
func (p *publisher) serve(conn *session.Conn, sess *session.Session) {
	for sess != nil {
		p.ackLoop(sess)
		if !p.ended(conn, sess) {
			return
		}
		sess = p.reopen(conn)
	}
}

// ackLoop completes publishes as the node acks or refuses them, until the
// session ends.
func (p *publisher) ackLoop(sess *session.Session) {
	for a := range sess.Acks() {
		p.mu.Lock()
		if p.sess == sess {
			p.acked(a)
		}
		p.mu.Unlock()
	}
}

// ended forgets sess, which the node ended while conn is up, and reports
// whether the publisher must open another on conn. When the node ended it
// for its full store, what was sent on it and not acked fails with
// ErrStoreFull: the node acked what it stored before it ended the
// session. What was not sent yet waits for the next session. A session
// that ended with its connection is the connection loop's to replace.
func (p *publisher) ended(conn *session.Conn, sess *session.Session) bool {
	if conn.Err() != nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sess != sess {
		return false // replaced meanwhile
	}
	if errors.Is(sess.Err(), session.ErrFull) {
		for _, r := range p.flight[:p.sent] {
			p.complete(r, fmt.Errorf("send to %q: store full at node %s; send it again once the node has room: %w", r.dest, conn.Peer().Name, ErrStoreFull))
		}
	}
	p.sess, p.sent = nil, 0
	return true
}

// reopen opens another publish session on conn, after a wait that grows
// from ReconnectMin while opening fails, and returns it once it is
// installed: nil when conn or the client ended first, or another
// connection replaced conn. The wait keeps a client whose sends a full
// node keeps ending from opening a session per message.
func (p *publisher) reopen(conn *session.Conn) *session.Session {
	delay := p.c.opts.ReconnectMin
	for {
		t := time.NewTimer(delay/2 + rand.N(delay/2+1))
		select {
		case <-t.C:
		case <-conn.Done():
			t.Stop()
			return nil
		case <-p.c.ctx.Done():
			t.Stop()
			return nil
		}
		sess, err := p.open(conn)
		if err != nil {
			p.c.log.Warn("publish session not opened again; retrying", slog.Any(logkey.Error, err), slog.Duration("retry_in", delay))
			delay = min(2*delay, p.c.opts.ReconnectMax)
			continue
		}
		p.mu.Lock()
		if p.conn != conn || p.sess != nil {
			p.mu.Unlock()
			sess.CloseWithin("publish session not needed: the client moved to another connection", 0)
			return nil
		}
		p.install(sess)
		p.mu.Unlock()
		return sess
	}
}

// acked applies one ack or refusal; p.mu is held.
func (p *publisher) acked(a session.Ack) {
	if a.Seq < p.first || a.Seq-p.first >= uint64(p.sent) {
		return // not in flight: a stray from a misbehaving node
	}
	i := int(a.Seq - p.first)
	if a.Refused {
		p.complete(p.flight[i], refusalErr(p.flight[i].dest, a))
		return
	}
	for _, r := range p.flight[:i+1] {
		p.complete(r, nil)
		p.held -= r.size
	}
	clear(p.flight[:i+1])
	p.flight = p.flight[i+1:]
	p.first += uint64(i + 1)
	p.sent -= i + 1
	if p.space != nil {
		close(p.space)
		p.space = nil
	}
	p.pump()
}

// complete settles r with err, once; p.mu is held.
func (p *publisher) complete(r *pubReq, err error) {
	if r.settled {
		return
	}
	r.settled, r.err, r.data = true, err, nil
	close(r.done)
}

func refusalErr(dest string, a session.Ack) error {
	if a.Denied {
		return fmt.Errorf("send to %q: %s: %w", dest, a.Reason, ErrDenied)
	}
	return fmt.Errorf("send to %q: %s: %w", dest, a.Reason, ErrRefused)
}

// drain waits until nothing is in flight, or ctx ends.
func (p *publisher) drain(ctx context.Context) {
	for {
		p.mu.Lock()
		var last *pubReq
		for _, r := range p.flight {
			if !r.settled {
				last = r
			}
		}
		p.mu.Unlock()
		if last == nil {
			return
		}
		select {
		case <-last.done:
		case <-ctx.Done():
			return
		}
	}
}

// fail completes everything in flight with err and refuses new sends.
func (p *publisher) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.err = err
	for _, r := range p.flight {
		p.complete(r, err)
	}
	p.flight, p.held = nil, 0
	if p.space != nil {
		close(p.space)
		p.space = nil
	}
}
