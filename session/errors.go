package session

import (
	"errors"
	"fmt"
)

// Sentinel errors. Functions return them wrapped with what happened and to
// whom, for example `session 3 from plant-7: 1001 Data packets not yet
// received, window 1000: window exceeded`. Test for them with errors.Is.
var (
	// ErrFrameTooLarge is returned when a frame header declares a payload
	// longer than the limit: MaxFrame after the handshake, 4 KiB before it,
	// less for frame types that cannot be that long. Nothing of the declared
	// size is allocated, and the connection is closed.
	ErrFrameTooLarge = errors.New("frame too large")

	// ErrMalformed is returned by the Decode functions when a payload is not
	// the exact encoding of a packet: a field or length runs past the end,
	// or bytes are left over. On a connection it is fatal.
	ErrMalformed = errors.New("malformed packet")

	// ErrUnknownType is returned when a frame header carries a type this
	// version of the protocol does not define. On a connection it is fatal.
	ErrUnknownType = errors.New("unknown frame type")

	// ErrAuth is returned by Client and Server when the shared-secret
	// challenge fails on either side: a MAC that is missing or wrong, or a
	// peer that reported the failure (CodeAuth).
	ErrAuth = errors.New("authentication failed")

	// ErrVersion is returned when the two sides share no protocol version:
	// by Client and Server during the handshake, and by Open when the peer
	// refused a session for that reason.
	ErrVersion = errors.New("no common protocol version")

	// ErrRefused is returned by Open when the peer refused the session (an
	// unknown address, a limit, a role that does not accept it); the error
	// is a *RemoteError whose Reason says why.
	ErrRefused = errors.New("session refused")

	// ErrIdle is returned (as Conn.Err, and by everything blocked on the
	// connection) when nothing arrived from the peer for IdleTimeout, not
	// even a Ping.
	ErrIdle = errors.New("peer idle")

	// ErrClosed is returned by operations on a Conn or Session that was
	// closed: by Close on this side, or in order by the peer.
	ErrClosed = errors.New("closed")

	// ErrWindow is returned when a session's peer exceeds its window: more
	// Data packets waiting for Recv than the negotiated window, or more
	// acknowledgements than packets in flight. The connection is closed.
	ErrWindow = errors.New("window exceeded")

	// ErrProtocol is returned when the peer sends a well-formed frame that
	// is not valid where it came: a packet on the wrong session or side, a
	// second SessionCreate for an id in use, Data before Accept, non-zero
	// reserved flags. The connection is closed.
	ErrProtocol = errors.New("protocol violation")

	// ErrLimit is returned when a configured bound is reached that is not a
	// session window: too many sessions on one connection, or a peer that
	// sends requests faster than it reads the replies.
	ErrLimit = errors.New("limit reached")

	// ErrDenied is returned by Open when the peer's access rules refused
	// the session (a *RemoteError with CodeDenied), and carried by an Ack
	// with Denied set for a refused packet.
	ErrDenied = errors.New("access denied")

	// ErrFull is returned when the peer ended a session because it has no
	// room for what the session carries (its store is full, or its disk):
	// a *RemoteError with CodeFull. What the peer did not acknowledge it
	// did not store, and a later session may succeed once room returns;
	// unlike a refusal, it is not for good.
	ErrFull = errors.New("no room")
)

// Error codes carried by ErrorPacket.
const (
	CodeProtocol uint16 = 1 // the frame or packet broke the protocol
	CodeAuth     uint16 = 2 // the shared-secret challenge failed
	CodeVersion  uint16 = 3 // no common protocol version
	CodeRefused  uint16 = 4 // the session or connection is refused
	CodeShutdown uint16 = 5 // the sender is closing in order
	CodeLimit    uint16 = 6 // a window or a configured limit was exceeded
	CodeDenied   uint16 = 7 // the session is refused by the peer's access rules
	CodeFull     uint16 = 8 // the receiver has no room now: the session ends, try again later
)

// RemoteError is returned when the peer sent an ErrorPacket, and by Open
// when the peer refused the session. It wraps the sentinel that matches its
// code, so errors.Is(err, ErrAuth) holds for a peer that reported CodeAuth;
// errors.As gives the code and the peer's reason.
type RemoteError struct {
	Code   uint16
	Reason string
}

func (e *RemoteError) Error() string {
	return fmt.Sprintf("peer reported %s: %s", codeName(e.Code), e.Reason)
}

// Unwrap returns the sentinel for e.Code, or nil for a code this version
// does not know.
func (e *RemoteError) Unwrap() error {
	switch e.Code {
	case CodeProtocol:
		return ErrProtocol
	case CodeAuth:
		return ErrAuth
	case CodeVersion:
		return ErrVersion
	case CodeRefused:
		return ErrRefused
	case CodeShutdown:
		return ErrClosed
	case CodeLimit:
		return ErrLimit
	case CodeDenied:
		return ErrDenied
	case CodeFull:
		return ErrFull
	}
	return nil
}

func codeName(code uint16) string {
	switch code {
	case CodeProtocol:
		return "a protocol error"
	case CodeAuth:
		return "an authentication failure"
	case CodeVersion:
		return "no common version"
	case CodeRefused:
		return "a refusal"
	case CodeShutdown:
		return "a shutdown"
	case CodeLimit:
		return "a limit"
	case CodeDenied:
		return "an access denial"
	case CodeFull:
		return "no room"
	}
	return fmt.Sprintf("error code %d", code)
}

// codeFor picks the ErrorPacket code that tells the peer why this side is
// closing the connection with err.
func codeFor(err error) uint16 {
	switch {
	case errors.Is(err, ErrAuth):
		return CodeAuth
	case errors.Is(err, ErrVersion):
		return CodeVersion
	case errors.Is(err, ErrWindow), errors.Is(err, ErrLimit), errors.Is(err, ErrFrameTooLarge):
		return CodeLimit
	case errors.Is(err, ErrClosed):
		return CodeShutdown
	case errors.Is(err, ErrRefused):
		// A handshake refused for a cause the peer can wait out (the
		// receiver's bound on one identity's connections): not its fault.
		return CodeRefused
	}
	return CodeProtocol
}
