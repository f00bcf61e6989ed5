package session

import (
	"context"
	"fmt"
)

// Sessions of clients: processes that are not nodes but produce and consume
// through one. The wire is drawn in doc.go (Clients); the packets of
// subscribe sessions are in packets_client.go.

// subState is the flow control of a subscribe session, guarded by the
// session's mu.
type subState struct {
	// server side
	credit   uint32        // deliveries this side may still send
	creditCh chan struct{} // capacity 1: credit arrived
	granted  uint64        // credit granted by Credit packets, in all
	grantCh  chan struct{} // capacity 1: granted grew (WaitGranted)
	settles  []Settle      // received, not yet taken by WaitSettles
	tags     int           // tags in settles
	settleCh chan struct{} // capacity 1: settles arrived

	// client side: deliveries received, not yet taken; capacity the window
	deliveries chan Deliver
}

// settleBacklog bounds the tags received in Settles and not yet taken by
// WaitSettles. A client that keeps to the protocol settles only what it
// holds, which the server bounds to a few windows; this is well above.
func settleBacklog(window uint32) int { return 8*int(window) + MaxSettleTags }

// setKind records which kind of session the SessionCreate flags open.
func (s *Session) setKind(flags uint8) {
	s.file = flags&FlagFile != 0
	s.publish = flags&FlagPublish != 0
	if flags&FlagSubscribe != 0 {
		s.sub = &subState{creditCh: make(chan struct{}, 1), grantCh: make(chan struct{}, 1), settleCh: make(chan struct{}, 1)}
	}
}

// Publish reports whether the session is a publish session
// (Conn.OpenPublish).
func (s *Session) Publish() bool { return s.publish }

// Subscribe reports whether the session is a subscribe session
// (Conn.OpenSubscribe).
func (s *Session) Subscribe() bool { return s.sub != nil }

// OpenPublish opens a publish session on a client connection: the same as
// Open, with FlagPublish and no address, so that the server routes each
// Data packet's message by its own destination.
func (c *Conn) OpenPublish(ctx context.Context, window uint32) (*Session, error) {
	return c.open(ctx, "", window, FlagPublish)
}

// OpenSubscribe opens a subscribe session for address on a client
// connection: the server pushes the address's messages (NextDelivery) with
// window as the initial credit, and the client grants more (Grant) and
// settles them (Settle). A refusal by the server's access rules wraps
// ErrDenied; any other refusal ErrRefused.
func (c *Conn) OpenSubscribe(ctx context.Context, address string, window uint32) (*Session, error) {
	return c.open(ctx, address, window, FlagSubscribe)
}

// OpenTopic opens a subscribe session on a topic subscription: as
// OpenSubscribe, with FlagTopic, for the subscription sub of pattern (made
// by the server if it does not exist).
func (c *Conn) OpenTopic(ctx context.Context, pattern string, sub TopicSubscription, window uint32) (*Session, error) {
	if len(sub.Name) > maxStr16 {
		return nil, fmt.Errorf("open topic session for a subscription name of %d bytes: longer than %d", len(sub.Name), maxStr16)
	}
	return c.openWith(ctx, pattern, window, FlagSubscribe|FlagTopic, &sub)
}

// Topic returns the topic subscription of a session opened with FlagTopic
// (Conn.OpenTopic); false for any other session.
func (s *Session) Topic() (TopicSubscription, bool) {
	if s.topic == nil {
		return TopicSubscription{}, false
	}
	return *s.topic, true
}

// Deny refuses a session returned by Conn.Accept because access rules
// forbid it: as Refuse, but the client's Open returns an error wrapping
// ErrDenied.
func (s *Session) Deny(reason string) error {
	return s.refuse(reason, FlagDenied)
}

// DenySeq refuses seq because access rules forbid it: as RefuseSeq, with
// FlagDenied, so the sender's Ack has Denied set. It does not block.
func (s *Session) DenySeq(seq uint64, reason string) error {
	return s.reply("deny seq", TypeRefuse, FlagDenied, Refuse{Seq: seq, Reason: reason})
}

// subscribeSide checks that the session is a subscribe session on the
// given side (client: the one that opened it).
func (s *Session) subscribeSide(client bool, op string) error {
	switch {
	case s.sub == nil:
		return fmt.Errorf("%s on session %d: not a subscribe session: %w", op, s.id, ErrProtocol)
	case client && !s.client:
		return fmt.Errorf("%s on session %d: only the subscribing side can: %w", op, s.id, ErrProtocol)
	case !client && s.client:
		return fmt.Errorf("%s on session %d: only the delivering side can: %w", op, s.id, ErrProtocol)
	}
	return nil
}

// WaitGranted blocks on the server side of a subscribe session until the
// client granted, by Credit packets, more than seen in all (the initial
// window not counted), and returns that sum. A client that grants one
// credit per delivery its application takes, in the order they came,
// tells the server so which deliveries were taken: the k-th credit
// granted is the k-th delivery. It returns the session's error once the
// session is no longer open.
func (s *Session) WaitGranted(ctx context.Context, seen uint64) (uint64, error) {
	if err := s.subscribeSide(false, "wait for grants"); err != nil {
		return 0, err
	}
	for {
		s.mu.Lock()
		if s.state != stateOpen {
			err := s.stateErr("wait for grants")
			s.mu.Unlock()
			return 0, err
		}
		n := s.sub.granted
		s.mu.Unlock()
		if n > seen {
			return n, nil
		}
		select {
		case <-s.sub.grantCh:
		case <-s.done:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// WaitCredit blocks on the server side of a subscribe session until the
// client allows at least one more delivery, and returns how many it allows.
// It returns the session's error once the session is no longer open.
func (s *Session) WaitCredit(ctx context.Context) (uint32, error) {
	if err := s.subscribeSide(false, "wait for credit"); err != nil {
		return 0, err
	}
	for {
		s.mu.Lock()
		if s.state != stateOpen {
			err := s.stateErr("wait for credit")
			s.mu.Unlock()
			return 0, err
		}
		n := s.sub.credit
		s.mu.Unlock()
		if n > 0 {
			return n, nil
		}
		select {
		case <-s.sub.creditCh:
		case <-s.done:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// Deliver sends d on the server side of a subscribe session, spending one
// credit; with none left it fails (call WaitCredit first). It copies
// d.Message. Like SendData, it blocks while the connection's write queue
// is full, until ctx is done, the session ends or the connection dies.
func (s *Session) Deliver(ctx context.Context, d Deliver) error {
	if err := s.subscribeSide(false, "deliver"); err != nil {
		return err
	}
	if n := deliverFixed + min(len(d.Reason), maxStr16) + len(d.Message); uint64(n) > uint64(s.out.maxFrame) {
		return fmt.Errorf("deliver on session %d: message of %d bytes: %w", s.id, len(d.Message), ErrFrameTooLarge)
	}
	s.mu.Lock()
	if s.state != stateOpen {
		err := s.stateErr("deliver")
		s.mu.Unlock()
		return err
	}
	if s.sub.credit == 0 {
		s.mu.Unlock()
		return fmt.Errorf("deliver on session %d: no credit left: %w", s.id, ErrWindow)
	}
	s.sub.credit--
	s.mu.Unlock()
	if err := s.out.deliver(ctx, s.id, d, s.done); err != nil {
		if e := s.Err(); e != nil {
			return e
		}
		return err
	}
	return nil
}

// WaitSettles blocks on the server side of a subscribe session until the
// client settled deliveries, and appends the Settles that arrived to dst.
// Settles that arrived before the session ended are still returned; then
// it returns the session's error.
func (s *Session) WaitSettles(ctx context.Context, dst []Settle) ([]Settle, error) {
	if err := s.subscribeSide(false, "wait for settles"); err != nil {
		return dst, err
	}
	for {
		s.mu.Lock()
		if len(s.sub.settles) > 0 {
			dst = append(dst, s.sub.settles...)
			clear(s.sub.settles)
			s.sub.settles, s.sub.tags = s.sub.settles[:0], 0
			s.mu.Unlock()
			return dst, nil
		}
		if s.state != stateOpen {
			err := s.stateErr("wait for settles")
			s.mu.Unlock()
			return dst, err
		}
		s.mu.Unlock()
		select {
		case <-s.sub.settleCh:
		case <-s.done:
		case <-ctx.Done():
			return dst, ctx.Err()
		}
	}
}

// Grant allows the server n more deliveries, on the client side of a
// subscribe session. Grant only for deliveries taken (NextDelivery): the
// deliveries granted and buffered must never exceed the window. It does
// not block.
func (s *Session) Grant(n uint32) error {
	if err := s.subscribeSide(true, "grant credit"); err != nil {
		return err
	}
	return s.clientReply("grant credit", TypeCredit, Credit{N: n})
}

// Settle settles deliveries by tag on the client side of a subscribe
// session, in packets of at most MaxSettleTags. reason is for nack and
// reject. It does not block.
func (s *Session) Settle(op SettleOp, tags []uint64, reason string) error {
	if err := s.subscribeSide(true, "settle"); err != nil {
		return err
	}
	for len(tags) > 0 {
		n := min(len(tags), MaxSettleTags)
		if err := s.clientReply("settle", TypeSettle, Settle{Op: op, Tags: tags[:n], Reason: reason}); err != nil {
			return err
		}
		tags = tags[n:]
	}
	return nil
}

// clientReply sends a control packet from the client side of an open session.
func (s *Session) clientReply(what string, t Type, p appender) error {
	s.mu.Lock()
	if s.state != stateOpen {
		err := s.stateErr(what)
		s.mu.Unlock()
		return err
	}
	s.mu.Unlock()
	return s.send(t, 0, p)
}

// NextDelivery returns the next delivery on the client side of a subscribe
// session, blocking until one arrives, ctx is done or the session ends.
// Once the session has ended it returns the session's error at once, even
// with deliveries buffered: the server gave their leases back when the
// session ended, so they must not be handled. The caller owns d.Message.
func (s *Session) NextDelivery(ctx context.Context) (Deliver, error) {
	if err := s.subscribeSide(true, "next delivery"); err != nil {
		return Deliver{}, err
	}
	ch := s.deliveriesChan()
	select {
	case d := <-ch:
		return s.unlessEnded(d)
	case <-s.done:
		return Deliver{}, s.Err()
	case <-ctx.Done():
		return Deliver{}, ctx.Err()
	}
}

// TryNextDelivery returns the next delivery if one is buffered, without
// blocking; ok is false when none is, or the session has ended.
func (s *Session) TryNextDelivery() (d Deliver, ok bool) {
	if s.sub == nil || !s.client {
		return Deliver{}, false
	}
	select {
	case d := <-s.deliveriesChan():
		d, err := s.unlessEnded(d)
		return d, err == nil
	default:
		return Deliver{}, false
	}
}

// Buffered returns how many deliveries the client side holds, not yet
// taken.
func (s *Session) Buffered() int {
	if s.sub == nil || !s.client {
		return 0
	}
	return len(s.deliveriesChan())
}

func (s *Session) deliveriesChan() chan Deliver {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sub.deliveries // nil before the session opened: blocks
}

func (s *Session) unlessEnded(d Deliver) (Deliver, error) {
	select {
	case <-s.done:
		return Deliver{}, s.Err()
	default:
		return d, nil
	}
}

// onDeliver queues a Deliver for NextDelivery. More than the window
// buffered means the server sent past its credit: fatal.
func (c *Conn) onDeliver(id uint32, p []byte) error {
	d, err := DecodeDeliver(p)
	if err != nil {
		return err
	}
	s := c.tab.get(id)
	if s == nil {
		return c.notOpen(id, TypeDeliver)
	}
	if s.sub == nil {
		return fmt.Errorf("Deliver on session %d, which is not a subscribe session: %w", id, ErrProtocol)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.state {
	case stateOpen:
		select {
		case s.sub.deliveries <- d:
			return nil
		default:
			return fmt.Errorf("session %d: more than %d deliveries not yet taken, the window: the server sent past its credit: %w", id, s.window, ErrWindow)
		}
	case stateClosing, stateEnded:
		return nil // sent before the server saw this side close
	}
	return fmt.Errorf("Deliver on session %d before it was accepted: %w", id, ErrProtocol)
}

// onSubscribeControl takes a client's Credit or Settle.
func (c *Conn) onSubscribeControl(h Header, p []byte) error {
	var credit Credit
	var settle Settle
	var err error
	if h.Type == TypeCredit {
		credit, err = DecodeCredit(p)
	} else {
		settle, err = DecodeSettle(p)
	}
	if err != nil {
		return err
	}
	s := c.tab.get(h.Session)
	if s == nil {
		return c.notOpen(h.Session, h.Type)
	}
	if s.sub == nil {
		return fmt.Errorf("%s on session %d, which is not a subscribe session: %w", h.Type, h.Session, ErrProtocol)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.state {
	case statePending:
		return fmt.Errorf("%s on session %d before it was accepted: %w", h.Type, h.Session, ErrProtocol)
	case stateEnded:
		return nil
	}
	if h.Type == TypeCredit {
		return s.addCredit(credit.N)
	}
	return s.addSettle(settle)
}

// addCredit adds n to the credit; s.mu is held.
func (s *Session) addCredit(n uint32) error {
	if s.state != stateOpen {
		return nil // closing: nothing more is sent
	}
	if uint64(s.sub.credit)+uint64(n) > uint64(s.window) {
		return fmt.Errorf("session %d: credit of %d granted on top of %d, past the window of %d: %w", s.id, n, s.sub.credit, s.window, ErrWindow)
	}
	s.sub.credit += n
	s.sub.granted += uint64(n)
	signal(s.sub.creditCh)
	signal(s.sub.grantCh)
	return nil
}

// addSettle queues st for WaitSettles; s.mu is held.
func (s *Session) addSettle(st Settle) error {
	if s.sub.tags+len(st.Tags) > settleBacklog(s.window) {
		return fmt.Errorf("session %d: more than %d settled tags not yet taken: %w", s.id, settleBacklog(s.window), ErrLimit)
	}
	s.sub.settles = append(s.sub.settles, st)
	s.sub.tags += len(st.Tags)
	signal(s.sub.settleCh)
	return nil
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// deliverFixed is the size of a Deliver payload without its reason and
// message: tag, attempt and the reason's length.
const deliverFixed = 8 + 4 + 2

// deliver queues a Deliver frame, copying d.Message, as data does for a
// Data frame: it blocks while queueBytes are waiting, until writeLoop takes
// them, ctx is done, the session ends or the connection dies.
func (o *outbox) deliver(ctx context.Context, sid uint32, d Deliver, sessionDone <-chan struct{}) error {
	reason := d.Reason
	if len(reason) > maxStr16 {
		reason = reason[:maxStr16]
	}
	return o.bulk(ctx, sid, sessionDone, func(buf []byte) []byte {
		buf = AppendHeader(buf, Header{Type: TypeDeliver, Session: sid, Length: uint32(deliverFixed + len(reason) + len(d.Message))})
		buf = be.AppendUint64(buf, d.Tag)
		buf = be.AppendUint32(buf, d.Attempt)
		buf = appendStr16(buf, reason)
		return append(buf, d.Message...)
	})
}
