package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// Session is one sender–receiver conversation on a Conn. Sessions are
// one-way: the client side (which called Open) is the sender, with SendData
// and Acks; the server side (from Accept) is the receiver, with Recv, Ack
// and RefuseSeq. Close and Done work on both.
//
// A Session passes sequence numbers through as they come. It does not
// reorder, dedupe or check that they increase: replays after a reconnect
// and gaps reach Recv exactly as the sender sent them, and deciding what to
// store is the receiver's job.
//
// All methods are safe for concurrent use.
type Session struct {
	id      uint32
	address string
	client  bool
	file    bool // opened with FlagFile
	self    Peer // this node, for the packets it sends
	timeout time.Duration
	out     *outbox
	tab     *table

	publish bool               // opened with FlagPublish
	sub     *subState          // flow control of a session opened with FlagSubscribe; nil otherwise
	topic   *TopicSubscription // the subscription of a session opened with FlagTopic; nil otherwise

	mu        sync.Mutex
	state     state
	peer      Peer
	version   uint16
	window    uint32
	reqWindow uint32        // the window the client asked for
	minWindow uint32        // server: the least window Accept grants (Config.PublishWindow for a publish session)
	inbound   inQueue       // server: Data not yet taken by Recv
	acks      chan Ack      // acks and refusals not yet read, made by the first Acks call (client)
	ackq      []Ack         // client: acks not yet read, while Acks was never called
	ackSig    chan struct{} // client: signalled (cap 1) when ackq grows
	ackCap    int           // client: the most acks that may wait unread, 2×Window+2
	created   chan struct{} // client: closed when the peer accepted
	err       error         // why it ended
	eof       bool          // ended by the peer's SessionClose
	done      chan struct{}
	buf       sessionBuffer // server: the bytes of inbound, in the connection's budget
	afterEnd  []*afterEnd   // see AfterEnd
}

// afterEnd is a function AfterEnd registered.
type afterEnd struct{ f func() }

type state uint8

const (
	stateOpening state = iota // client: SessionCreate sent, no response yet
	statePending              // server: waiting for Accept or Refuse
	stateOpen
	stateClosing // SessionClose sent, waiting for the response
	stateEnded
)

// Ack is what the receiver said about the session's packets: a cumulative
// acknowledgement (every seq <= Seq is durable there) or, with Refused, a
// refusal of Seq alone.
type Ack struct {
	Seq     uint64
	Refused bool
	Denied  bool   // refused by the receiver's access rules (FlagDenied)
	Reason  string // why Seq was refused
}

// ID returns the session id, unique on its connection while it is open.
func (s *Session) ID() uint32 { return s.id }

// File reports whether the session is a file session (Conn.OpenFile).
func (s *Session) File() bool { return s.file }

// Address returns the address the session serves.
func (s *Session) Address() string { return s.address }

// Peer returns the node at the other end, as it named itself in the
// session's packets.
func (s *Session) Peer() Peer {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peer
}

// Window returns the negotiated window: the lesser of both sides'. The
// sender keeps at most this many packets unacknowledged; it is 0 on a
// server session until Accept.
func (s *Session) Window() uint32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.window
}

// Done is closed when the session has ended: closed by either side, refused,
// or with its connection.
func (s *Session) Done() <-chan struct{} { return s.done }

// AfterEnd arranges for f to run once the session has ended, as
// context.AfterFunc does for a context, but in the goroutine that ends
// it (or in AfterEnd's caller, if it has ended already), after the
// session's lock is released: f must not block. Nothing waits for the end
// meanwhile: a sender whose queue is idle learns that its session ended
// this way, without a goroutine of its own per session. stop unregisters
// f, and reports whether it did so before f was run.
func (s *Session) AfterEnd(f func()) (stop func() bool) {
	a := &afterEnd{f: f}
	s.mu.Lock()
	if s.state == stateEnded {
		s.mu.Unlock()
		f()
		return func() bool { return false }
	}
	defer s.mu.Unlock()
	s.afterEnd = append(s.afterEnd, a)
	return func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		for i, x := range s.afterEnd {
			if x == a {
				s.afterEnd = append(s.afterEnd[:i], s.afterEnd[i+1:]...)
				return true
			}
		}
		return false
	}
}

// Err returns why the session ended, or nil while it is open. After an
// orderly close it wraps ErrClosed (with the peer's reason if the peer
// closed it).
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Accept accepts a session returned by Conn.Accept, with a window of at
// least 1. The negotiated window is the least of window (raised to
// Config.PublishWindow for a publish session), the client's and
// MaxWindow. The session buffers at most that many Data packets not yet
// taken by Recv.
func (s *Session) Accept(window uint32) error {
	if window == 0 {
		return fmt.Errorf("accept session %d: window must be at least 1", s.id)
	}
	s.mu.Lock()
	if s.state != statePending {
		err := s.stateErr("accept")
		s.mu.Unlock()
		return err
	}
	s.window = min(max(window, s.minWindow), s.reqWindow, MaxWindow)
	if s.sub != nil {
		s.sub.credit = s.window // a subscribe session starts with its window as credit
	} else {
		s.inbound.open()
	}
	s.state = stateOpen
	resp := SessionCreateResponse{Version: s.version, Name: s.self.Name, ID: s.self.ID, Window: s.window}
	s.mu.Unlock()
	return s.send(TypeSessionCreateResponse, 0, resp)
}

// Refuse refuses a session returned by Conn.Accept. The client's Open
// returns an error wrapping ErrRefused with reason.
func (s *Session) Refuse(reason string) error {
	return s.refuse(reason, 0)
}

func (s *Session) refuse(reason string, flags uint8) error {
	s.mu.Lock()
	if s.state != statePending {
		err := s.stateErr("refuse")
		s.mu.Unlock()
		return err
	}
	s.mu.Unlock()
	s.tab.remove(s.id, s)
	s.end(fmt.Errorf("session %d refused by this side: %s: %w", s.id, reason, ErrRefused), false)
	return s.send(TypeSessionCreateResponse, flags, SessionCreateResponse{Reason: reason, Name: s.self.Name, ID: s.self.ID})
}

// SendData queues a Data frame with seq and msg (an encoded message) on the
// sending side. It copies msg, which may be reused after it returns. It
// blocks while the connection's write queue is full, until ctx is done, the
// session ends or the connection dies. Keeping within the window is the
// caller's job (see Acks).
func (s *Session) SendData(ctx context.Context, seq uint64, msg []byte) error {
	if !s.client {
		return fmt.Errorf("send data on session %d: the receiving side cannot send Data: %w", s.id, ErrProtocol)
	}
	if s.sub != nil {
		return fmt.Errorf("send data on session %d: a subscribe session carries no Data: %w", s.id, ErrProtocol)
	}
	s.mu.Lock()
	if s.state != stateOpen {
		err := s.stateErr("send data")
		s.mu.Unlock()
		return err
	}
	s.mu.Unlock()
	if uint64(len(msg))+8 > uint64(s.out.maxFrame) {
		return fmt.Errorf("send data on session %d: message of %d bytes: %w", s.id, len(msg), ErrFrameTooLarge)
	}
	if err := s.out.data(ctx, s.id, seq, msg, s.done); err != nil {
		if e := s.Err(); e != nil {
			return e
		}
		return err
	}
	return nil
}

// Acks returns the receiver's acknowledgements and refusals, in arrival
// order. The channel is closed when the session ends (after the ones that
// arrived before). It buffers 2×Window+2 entries: enough for a sender that
// keeps at most Window packets unacknowledged, counting the acks it has
// read, against a receiver that acks and refuses each packet. A receiver
// that sends more fails the connection with ErrWindow, so read Acks
// promptly. On the receiving side the channel only closes.
//
// The channel is made by the first call, holding what TakeAcks did not
// take; a sender that uses TakeAcks instead never pays for it, which is
// what keeps an idle session small.
func (s *Session) Acks() <-chan Ack {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.acks == nil && s.client && s.ackCap > 0 {
		s.acks = make(chan Ack, s.ackCap)
		for _, a := range s.ackq {
			s.acks <- a // fits: ackq never holds more than ackCap
		}
		s.ackq = nil
		if s.state == stateEnded {
			close(s.acks)
		}
	}
	return s.acks
}

// TakeAcks waits for the receiver's acknowledgements and refusals and
// appends every one that arrived, in arrival order, to dst. It returns
// false, with whatever arrived before, once the session has ended and
// nothing is left. The same bound as for Acks holds: at most 2×Window+2
// may wait unread. Use either TakeAcks or Acks on a session, not both.
func (s *Session) TakeAcks(dst []Ack) ([]Ack, bool) {
	for {
		s.mu.Lock()
		if s.acks != nil || !s.client {
			s.mu.Unlock()
			for a := range s.Acks() {
				return append(dst, a), true
			}
			return dst, false
		}
		if len(s.ackq) > 0 {
			dst = append(dst, s.ackq...)
			clear(s.ackq)
			if cap(s.ackq) > 64 {
				s.ackq = nil // a burst's buffer is not kept by an idle session
			} else {
				s.ackq = s.ackq[:0]
			}
			s.mu.Unlock()
			return dst, true
		}
		ended := s.state == stateEnded
		sig := s.ackSig
		s.mu.Unlock()
		if ended || sig == nil {
			return dst, false
		}
		select {
		case <-sig:
		case <-s.done:
		}
	}
}

// Recv returns the next Data packet on the receiving side, in arrival
// order, as the sender sent it (see Session). The caller owns d.Message.
// Packets that arrived before the session ended are still returned; then
// Recv returns io.EOF after the peer's orderly SessionClose, or the reason
// the session ended (the connection's error if it died).
func (s *Session) Recv(ctx context.Context) (Data, error) {
	if s.client {
		return Data{}, fmt.Errorf("receive on session %d: the sending side receives no Data: %w", s.id, ErrProtocol)
	}
	for {
		s.mu.Lock()
		if !s.inbound.opened() {
			err := s.stateErr("receive")
			s.mu.Unlock()
			return Data{}, err
		}
		if d, ok := s.inbound.pop(); ok {
			s.mu.Unlock()
			s.took(d)
			return d, nil
		}
		if s.state == stateEnded {
			defer s.mu.Unlock()
			if s.eof {
				return Data{}, io.EOF
			}
			return Data{}, s.err
		}
		more := s.inbound.more
		s.mu.Unlock()
		select {
		case <-more:
		case <-s.done:
		case <-ctx.Done():
			return Data{}, ctx.Err()
		}
	}
}

// TryRecv returns the next Data packet if one is already queued, without
// blocking; ok is false when none is. A receiver uses it to gather what
// arrived into one store operation.
func (s *Session) TryRecv() (d Data, ok bool) {
	if s.client {
		return Data{}, false
	}
	s.mu.Lock()
	d, ok = s.inbound.pop()
	s.mu.Unlock()
	if ok {
		s.took(d)
	}
	return d, ok
}

// Ack tells the sender that every seq <= seq of the session is durable
// here. It does not block.
func (s *Session) Ack(seq uint64) error {
	return s.reply("ack", TypeDataAck, 0, DataAck{Seq: seq})
}

// RefuseSeq tells the sender that seq will never be stored here, and why.
// It does not block.
func (s *Session) RefuseSeq(seq uint64, reason string) error {
	return s.reply("refuse seq", TypeRefuse, 0, Refuse{Seq: seq, Reason: reason})
}

func (s *Session) reply(what string, t Type, flags uint8, p appender) error {
	if s.client {
		return fmt.Errorf("%s on session %d: the sending side cannot: %w", what, s.id, ErrProtocol)
	}
	s.mu.Lock()
	if s.state != stateOpen {
		err := s.stateErr(what)
		s.mu.Unlock()
		return err
	}
	s.mu.Unlock()
	return s.send(t, flags, p)
}

// Close ends the session in order: it sends SessionClose with reason and
// waits for the peer's SessionCloseResponse, bounded by ctx and
// HandshakeTimeout. The session is freed on this side whatever happens,
// and on the peer's side once it answered. Closing a session not yet
// accepted refuses it. Close returns nil if the session ended in order (or
// had already ended), else why it did not.
func (s *Session) Close(ctx context.Context, reason string) error {
	s.mu.Lock()
	switch s.state {
	case statePending:
		s.mu.Unlock()
		return s.Refuse(reason)
	case stateOpen:
		s.state = stateClosing
		s.releaseBuffered()
		s.mu.Unlock()
		if err := s.send(TypeSessionClose, 0, SessionClose{Reason: reason}); err != nil {
			s.tab.remove(s.id, s)
			s.end(err, false)
			return err
		}
	default: // closing already, or ended
		s.mu.Unlock()
	}
	timer := time.NewTimer(s.timeout)
	defer timer.Stop()
	var err error
	select {
	case <-s.done:
		if e := s.Err(); e != nil && !errors.Is(e, ErrClosed) {
			return e
		}
		return nil
	case <-timer.C:
		err = fmt.Errorf("close session %d: no response within %v", s.id, s.timeout)
	case <-ctx.Done():
		err = fmt.Errorf("close session %d: %w", s.id, ctx.Err())
	}
	s.tab.remove(s.id, s)
	s.end(fmt.Errorf("session %d closed without a response: %w", s.id, ErrClosed), false)
	return err
}

// CloseWithin closes the session in order (see Close) for a caller that
// has no context to bound it with: a session's goroutine ending, a
// deferred cleanup. It waits at most d for the peer's answer, and never
// longer than the session's HandshakeTimeout, which is also the wait when
// d is zero or less: a zero must not cut the close short, or the last
// acks the close would have carried are lost.
func (s *Session) CloseWithin(reason string, d time.Duration) error {
	if d <= 0 || d > s.timeout {
		return s.Close(context.Background(), reason)
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return s.Close(ctx, reason)
}

// Abort ends the session because this side cannot go on with it, and
// tells the peer why with code (CodeFull: no room now): a session-level
// ErrorPacket, which ends the peer's session with a *RemoteError that
// wraps the code's sentinel. A SessionClose follows it, which the peer
// answers whether or not its session is still there: until the answer,
// the Data the peer sent before it read the error is dropped here
// quietly, where a removed session would answer each packet with an
// error of its own. Closing, Abort waits as CloseWithin does with a zero
// wait. A session not yet accepted is refused with reason; one that has
// ended stays as it was.
func (s *Session) Abort(code uint16, reason string) error {
	s.mu.Lock()
	st := s.state
	s.mu.Unlock()
	switch st {
	case statePending:
		return s.Refuse(reason)
	case stateOpen:
		if err := s.send(TypeError, 0, ErrorPacket{Code: code, Reason: reason}); err != nil {
			s.tab.remove(s.id, s)
			s.end(err, false)
			return err
		}
	}
	return s.CloseWithin(reason, 0)
}

// send queues a control frame on this session.
func (s *Session) send(t Type, flags uint8, p appender) error {
	return s.out.control(Header{Type: t, Flags: flags, Session: s.id}, p)
}

// stateErr explains why op is not possible in the current state; s.mu is
// held.
func (s *Session) stateErr(op string) error {
	switch s.state {
	case stateEnded:
		return s.err
	case statePending:
		return fmt.Errorf("%s on session %d: not accepted yet: %w", op, s.id, ErrProtocol)
	case stateClosing:
		return fmt.Errorf("%s on session %d: closing: %w", op, s.id, ErrClosed)
	}
	return fmt.Errorf("%s on session %d: %w", op, s.id, ErrProtocol)
}

// end ends the session with err, once: it closes Done, the Data queue (Recv
// drains what is left, then returns err or io.EOF) and the ack channel. It
// reports whether this call ended it. The caller removes s from the table.
func (s *Session) end(err error, eof bool) bool {
	s.mu.Lock()
	if s.state == stateEnded {
		s.mu.Unlock()
		return false
	}
	s.state, s.err, s.eof = stateEnded, err, eof
	s.releaseBuffered()
	if s.acks != nil {
		close(s.acks)
	}
	close(s.done)
	after := s.afterEnd
	s.afterEnd = nil
	s.mu.Unlock()
	for _, a := range after {
		a.f()
	}
	return true
}
