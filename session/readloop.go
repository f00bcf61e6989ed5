package session

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/bits"
	"os"

	"github.com/petrelmq/petrel/internal/logkey"
)

// readLoop reads frames until the connection dies and dispatches each to
// its session. It never blocks on anything but the socket: Data and acks go
// into bounded queues whose overflow is the peer's fault (ErrWindow), and
// replies go to the outbox, which never blocks for control frames. So one
// slow session cannot stall the others, and a peer that does not read
// cannot wedge this side.
func (c *Conn) readLoop() {
	defer c.loopDone()
	notify, err := c.readFrames()
	c.out.fail(err, notify)
	c.tab.endAll(c.out.Err())
}

// readFrames returns the error that ended reading, and whether the peer
// should be told (it broke the protocol, rather than went away or sent an
// ErrorPacket itself).
func (c *Conn) readFrames() (notify bool, err error) {
	for {
		if _, err := io.ReadFull(c.br, c.hdr[:]); err != nil {
			return false, c.readErr(err)
		}
		h, _ := ParseHeader(c.hdr[:])
		if err := c.checkHeader(h); err != nil {
			return true, err
		}
		held := int64(0)
		if h.Type == TypeData && !c.client {
			// Wait for room before reading the payload: while the
			// connection holds MaxConnBuffer, the socket is not read.
			held = int64(h.Length)
			if !c.budget.acquire(held, c.out.quit) {
				return false, c.out.Err()
			}
		}
		buf := c.rbuf
		if h.Type == TypeData || h.Type == TypeDeliver {
			// Recv's caller owns the payload: read it into its own slice,
			// a pooled one for a Data frame that Release may give back.
			buf = nil
			if h.Type == TypeData {
				buf = getPayload(int(h.Length))
			}
		} else if int(h.Length) > cap(buf) {
			c.rbuf = make([]byte, h.Length)
			buf = c.rbuf
		}
		p, err := readPayload(c.br, h, buf)
		if err != nil {
			c.budget.release(held)
			return false, c.readErr(err)
		}
		c.framesIn.Add(1)
		c.bytesIn.Add(HeaderLen + uint64(h.Length))
		if err := c.dispatch(h, p); err != nil {
			var remote *RemoteError
			return !errors.As(err, &remote), err
		}
	}
}

func (c *Conn) readErr(err error) error {
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Errorf("nothing received from %s for %v: %w", c.peer.Name, c.cfg.IdleTimeout, ErrIdle)
	case err == io.EOF:
		return fmt.Errorf("read from %s: connection closed by the peer without a reason: %w", c.peer.Name, err)
	}
	return fmt.Errorf("read from %s: %w", c.peer.Name, err)
}

// checkHeader refuses a frame before its payload is read: an unknown type,
// reserved flags, or a length over the type's limit.
func (c *Conn) checkHeader(h Header) error {
	if !h.Type.Known() {
		return fmt.Errorf("frame of %s on session %d: %w", h.Type, h.Session, ErrUnknownType)
	}
	if h.Flags&^h.Type.allowedFlags() != 0 {
		return fmt.Errorf("%s frame on session %d has reserved flags %#02x set: %w", h.Type, h.Session, h.Flags, ErrProtocol)
	}
	if lim := maxPayload(h.Type, c.cfg.MaxFrame); h.Length > lim {
		return tooLarge(h, lim)
	}
	return nil
}

// dispatch handles one frame. An error is fatal to the connection.
func (c *Conn) dispatch(h Header, p []byte) error {
	if h.Session == 0 {
		return c.onConnFrame(h, p)
	}
	switch h.Type {
	case TypeSessionCreate, TypeData:
		if c.client {
			return c.wrongSide(h)
		}
		if h.Type == TypeData {
			return c.onData(h.Session, p)
		}
		return c.onCreate(h, p)
	case TypeSessionCreateResponse, TypeDataAck, TypeRefuse:
		if !c.client {
			return c.wrongSide(h)
		}
		if h.Type == TypeSessionCreateResponse {
			return c.onCreateResponse(h, p)
		}
		return c.onAck(h, p)
	case TypeDeliver:
		if !c.client {
			return c.wrongSide(h)
		}
		return c.onDeliver(h.Session, p)
	case TypeCredit, TypeSettle:
		if c.client {
			return c.wrongSide(h)
		}
		return c.onSubscribeControl(h, p)
	case TypeSessionClose:
		return c.onClose(h.Session, p)
	case TypeSessionCloseResponse:
		return c.onCloseResponse(h.Session, p)
	case TypeError:
		return c.onSessionError(h.Session, p)
	}
	return fmt.Errorf("%s on session %d: valid only on session 0: %w", h.Type, h.Session, ErrProtocol)
}

func (c *Conn) wrongSide(h Header) error {
	side := "server"
	if c.client {
		side = "client"
	}
	return fmt.Errorf("%s on session %d sent to the %s, which never receives it: %w", h.Type, h.Session, side, ErrProtocol)
}

// onConnFrame handles a frame on session 0 after the handshake.
func (c *Conn) onConnFrame(h Header, p []byte) error {
	switch h.Type {
	case TypePing:
		ping, err := DecodePing(p)
		if err != nil {
			return err
		}
		return c.out.control(Header{Type: TypePong}, ping)
	case TypePong:
		_, err := DecodePing(p)
		return err
	case TypeError:
		e, err := DecodeErrorPacket(p)
		if err != nil {
			return err
		}
		return fmt.Errorf("%s closed the connection: %w", c.peer.Name, &RemoteError{Code: e.Code, Reason: e.Reason})
	}
	return fmt.Errorf("%s on session 0 after the handshake: %w", h.Type, ErrProtocol)
}

// decodeCreate decodes a SessionCreate by its flags, which must name one
// kind of session: FlagTopic comes only with FlagSubscribe.
func decodeCreate(h Header, p []byte) (SessionCreate, error) {
	kind := h.Flags &^ FlagTopic
	if bits.OnesCount8(kind) > 1 {
		return SessionCreate{}, fmt.Errorf("SessionCreate for session %d with flags %#02x: at most one of file, publish and subscribe: %w", h.Session, h.Flags, ErrProtocol)
	}
	if h.Flags&FlagTopic == 0 {
		return DecodeSessionCreate(p)
	}
	if kind != FlagSubscribe {
		return SessionCreate{}, fmt.Errorf("SessionCreate for session %d with flags %#02x: topic without subscribe: %w", h.Session, h.Flags, ErrProtocol)
	}
	return DecodeTopicSessionCreate(p)
}

// onCreate handles a client's SessionCreate: it refuses what the package
// cannot serve and queues the rest for Conn.Accept.
func (c *Conn) onCreate(h Header, p []byte) error {
	id := h.Session
	req, err := decodeCreate(h, p)
	if err != nil {
		return err
	}
	if c.tab.get(id) != nil {
		return fmt.Errorf("SessionCreate for session %d, which is already in use: %w", id, ErrProtocol)
	}
	v := c.choose(req.Versions)
	if v == 0 {
		return c.refuseCreate(id, FlagNoCommonVersion, fmt.Sprintf(
			"no common protocol version: %s offers versions %v, %s speaks %d to %d",
			req.Name, req.Versions, c.cfg.Name, c.cfg.versions[0], c.cfg.versions[1]))
	}
	if req.Window == 0 {
		return c.refuseCreate(id, 0, "window 0: the sender must allow at least one packet in flight")
	}
	s := c.newSession(id, req.Address)
	s.state = statePending
	s.setKind(h.Flags)
	if s.publish {
		s.minWindow = c.cfg.PublishWindow
	}
	s.topic = req.Topic
	s.version = v
	s.reqWindow = req.Window
	s.peer = Peer{Name: req.Name, ID: req.ID, Addr: c.peer.Addr}
	if err := c.tab.addServer(id, s); err != nil {
		if errors.Is(err, ErrLimit) {
			return c.refuseOverLimit(id, err.Error())
		}
		return err
	}
	select {
	case c.accepts <- s:
		return nil
	default: // cannot happen while accepts holds MaxSessions; refuse rather than block
		c.tab.remove(id, s)
		return c.refuseOverLimit(id, "too many sessions waiting to be accepted")
	}
}

// refuseOverLimit refuses a SessionCreate past MaxSessions, and counts it
// in Config.RefuseStats.
func (c *Conn) refuseOverLimit(id uint32, reason string) error {
	if st := c.cfg.RefuseStats; st != nil {
		st.OverLimit.Add(1)
	}
	c.log.Debug("session refused", slog.Uint64(logkey.Session, uint64(id)), slog.String(logkey.Reason, reason))
	return c.refuseCreate(id, 0, reason)
}

func (c *Conn) refuseCreate(id uint32, flags uint8, reason string) error {
	resp := SessionCreateResponse{Reason: reason, Name: c.cfg.Name, ID: c.cfg.ID}
	return c.out.control(Header{Type: TypeSessionCreateResponse, Flags: flags, Session: id}, resp)
}

// choose returns the highest offered version this side speaks, or 0.
func (c *Conn) choose(offered []uint16) uint16 {
	var best uint16
	for _, v := range offered {
		if c.speaks(v) && v > best {
			best = v
		}
	}
	return best
}

func (c *Conn) speaks(v uint16) bool {
	return v != 0 && v >= c.cfg.versions[0] && v <= c.cfg.versions[1]
}

// onCreateResponse completes or refuses an Open that is waiting.
func (c *Conn) onCreateResponse(h Header, p []byte) error {
	r, err := DecodeSessionCreateResponse(p)
	if err != nil {
		return err
	}
	s := c.tab.get(h.Session)
	if s == nil {
		return c.closeStray(h.Session, r)
	}
	s.mu.Lock()
	switch {
	case s.state == stateEnded: // Open gave up meanwhile
		s.mu.Unlock()
		return c.closeStray(h.Session, r)
	case s.state != stateOpening:
		s.mu.Unlock()
		return fmt.Errorf("second SessionCreateResponse for session %d: %w", h.Session, ErrProtocol)
	case r.Version == 0:
		s.mu.Unlock()
		code := CodeRefused
		if h.Flags&FlagNoCommonVersion != 0 {
			code = CodeVersion
		} else if h.Flags&FlagDenied != 0 {
			code = CodeDenied
		}
		c.tab.remove(h.Session, s)
		s.end(&RemoteError{Code: code, Reason: r.Reason}, false)
		return nil
	case !c.speaks(r.Version) || h.Flags != 0 || r.Window == 0 || r.Window > s.reqWindow:
		s.mu.Unlock()
		return fmt.Errorf("session %d accepted with version %d, window %d and flags %#02x; offered versions %v and window %d: %w",
			h.Session, r.Version, r.Window, h.Flags, c.offer(), s.reqWindow, ErrProtocol)
	}
	s.version, s.window = r.Version, r.Window
	s.peer = Peer{Name: r.Name, ID: r.ID, Addr: c.peer.Addr}
	s.ackCap = 2*int(r.Window) + 2
	s.ackSig = make(chan struct{}, 1)
	if s.sub != nil {
		s.sub.deliveries = make(chan Deliver, r.Window)
	}
	s.state = stateOpen
	close(s.created)
	s.mu.Unlock()
	return nil
}

// closeStray closes, on the peer, a session that Open had given up on
// before the peer accepted it.
func (c *Conn) closeStray(id uint32, r SessionCreateResponse) error {
	if r.Version == 0 {
		return nil
	}
	return c.out.control(Header{Type: TypeSessionClose, Session: id}, SessionClose{Reason: "open abandoned: no response in time"})
}

// onData queues a Data frame for its session's Recv. The frame's bytes
// were taken from the budget (readFrames); they go back here unless the
// session queued the frame.
func (c *Conn) onData(id uint32, p []byte) error {
	d, err := DecodeData(p)
	if err != nil {
		c.budget.release(int64(len(p)))
		return err
	}
	if isPooled(p) {
		d.frame = p
	}
	s := c.tab.get(id)
	if s == nil {
		c.budget.release(int64(len(p)))
		return c.notOpen(id, TypeData)
	}
	if s.sub != nil {
		c.budget.release(int64(len(p)))
		return fmt.Errorf("Data on subscribe session %d, which carries Deliver packets: %w", id, ErrProtocol)
	}
	return s.deliver(d)
}

func (c *Conn) onAck(h Header, p []byte) error {
	var a Ack
	if h.Type == TypeDataAck {
		x, err := DecodeDataAck(p)
		if err != nil {
			return err
		}
		a.Seq = x.Seq
	} else {
		x, err := DecodeRefuse(p)
		if err != nil {
			return err
		}
		a = Ack{Seq: x.Seq, Refused: true, Denied: h.Flags&FlagDenied != 0, Reason: x.Reason}
	}
	s := c.tab.get(h.Session)
	if s == nil {
		return c.notOpen(h.Session, h.Type)
	}
	return s.pushAck(a)
}

// notOpen answers a packet for a session that is not open here with a
// session-level ErrorPacket. It is not fatal: the session may have been
// closed on this side (Close timed out) while the packet was in flight.
func (c *Conn) notOpen(id uint32, t Type) error {
	e := ErrorPacket{Code: CodeProtocol, Reason: fmt.Sprintf("%s for session %d, which is not open", t, id)}
	return c.out.control(Header{Type: TypeError, Session: id}, e)
}

// onClose ends a session the peer closed, and answers.
func (c *Conn) onClose(id uint32, p []byte) error {
	sc, err := DecodeSessionClose(p)
	if err != nil {
		return err
	}
	if s := c.tab.get(id); s != nil {
		c.tab.remove(id, s)
		s.end(fmt.Errorf("session %d closed by %s: %q: %w", id, c.peer.Name, sc.Reason, ErrClosed), true)
	}
	// Answered even for an unknown id: both sides may close at once.
	return c.out.control(Header{Type: TypeSessionCloseResponse, Session: id}, nil)
}

func (c *Conn) onCloseResponse(id uint32, p []byte) error {
	if len(p) != 0 {
		return fmt.Errorf("SessionCloseResponse: %d bytes, want none: %w", len(p), ErrMalformed)
	}
	s := c.tab.get(id)
	if s == nil {
		return nil // the close had timed out here, or both sides closed at once
	}
	s.mu.Lock()
	st := s.state
	s.mu.Unlock()
	if st != stateClosing {
		return fmt.Errorf("SessionCloseResponse for session %d, which is not closing: %w", id, ErrProtocol)
	}
	c.tab.remove(id, s)
	s.end(fmt.Errorf("session %d closed: %w", id, ErrClosed), false)
	return nil
}

// onSessionError ends the session the peer reported an error on.
func (c *Conn) onSessionError(id uint32, p []byte) error {
	e, err := DecodeErrorPacket(p)
	if err != nil {
		return err
	}
	if s := c.tab.get(id); s != nil {
		c.tab.remove(id, s)
		s.end(fmt.Errorf("session %d: %w", id, &RemoteError{Code: e.Code, Reason: e.Reason}), false)
	}
	return nil
}

// deliver queues d for Recv, its bytes counted in the session's share of
// the budget. A full queue means the sender exceeded the window: fatal.
// A frame not queued gives its bytes back.
func (s *Session) deliver(d Data) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := dataSize(d)
	switch s.state {
	case stateOpen:
		if s.inbound.len() >= int(s.window) {
			s.buf.budget.release(n)
			return fmt.Errorf("session %d: more than %d Data packets not yet received, the window: %w", s.id, s.window, ErrWindow)
		}
		s.inbound.push(d)
		s.buf.queued += n
		return nil
	case stateClosing, stateEnded:
		s.buf.budget.release(n)
		return nil // sent before the peer saw this side close
	}
	s.buf.budget.release(n)
	return fmt.Errorf("Data on session %d before it was accepted: %w", s.id, ErrProtocol)
}

// pushAck queues a for Acks. A full queue means the receiver sent more
// than the window allows, or the sender is not reading Acks: fatal.
func (s *Session) pushAck(a Ack) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.state {
	case stateOpen:
		if s.acks == nil {
			if len(s.ackq) >= s.ackCap {
				return fmt.Errorf("session %d: more than %d acknowledgements not read, for a window of %d: %w", s.id, s.ackCap, s.window, ErrWindow)
			}
			s.ackq = append(s.ackq, a)
			select {
			case s.ackSig <- struct{}{}:
			default:
			}
			return nil
		}
		select {
		case s.acks <- a:
			return nil
		default:
			return fmt.Errorf("session %d: more than %d acknowledgements not read, for a window of %d: %w", s.id, cap(s.acks), s.window, ErrWindow)
		}
	case stateClosing, stateEnded:
		return nil
	}
	return fmt.Errorf("%s on session %d before it was accepted: %w", typeOf(a), s.id, ErrProtocol)
}

func typeOf(a Ack) Type {
	if a.Refused {
		return TypeRefuse
	}
	return TypeDataAck
}
