package mqttgw

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"
)

// errPacketTooLarge fails the writes to a connection that sent a packet
// past the Maximum Packet Size, once its DISCONNECT 0x95 went.
var errPacketTooLarge = errors.New("mqtt: packet past the maximum packet size")

// sizeGuard follows the packets a connection sends by their fixed
// headers, for two things only the reader beneath mochi can do:
//
//   - an MQTT 5 client whose packet passes the Maximum Packet Size gets
//     DISCONNECT 0x95 (4.13) before its connection closes. mochi refuses
//     such a packet as it reads its fixed header
//     (Client.ReadFixedHeader), before any hook sees it, and closes the
//     connection before OnDisconnect runs.
//   - a packet of smallPacket bytes or more, after the CONNECT, claims
//     its bytes from the gateway's packetClaims before mochi sees the
//     last byte of its fixed header, for mochi allocates the whole packet
//     as soon as it has it (see claims.go).
//
// Only the reading goroutine uses it, but for claims' Close.
//
// Each packet is a byte of type and flags, its remaining length in one to
// four bytes of seven bits each (the high bit set on all but the last),
// then that many bytes:
//
//	+------+------------------+----------------------+
//	| type | remaining length | remaining length ... |
//	+------+------------------+----------------------+
type sizeGuard struct {
	max  uint32 // mochi's Capabilities.MaximumPacketSize
	v5   bool   // set once the CONNECT is taken: only MQTT 5 has a DISCONNECT to send
	body int    // the current packet's bytes still to come
	hdr  [5]byte
	n    int // bytes of hdr read

	// claims is the connection's share of the gateway's packetClaims,
	// nil when nothing is claimed (tests of the guard alone); claiming
	// is set once the CONNECT is taken, which connecting.go bounded.
	claims   *claim
	claiming bool
	// done is set past the maximum, or a length mochi cannot decode: the
	// connection ends, nothing more is followed.
	done bool
	// held is bytes read but not handed to mochi: from the last byte of
	// a fixed header whose claim waits for room.
	held []byte
}

// read reads into b from c beneath the guard (see corkConn.readConn),
// and hands on the bytes up to a fixed header whose claim does not fit:
// that header's last byte comes in a later read, once it fits. A claim
// that waits claimWait in vain, or the connection closing meanwhile,
// fails the read, which ends the connection.
func (s *sizeGuard) read(c *corkConn, b []byte) (int, error) {
	var n int
	var err error
	if len(s.held) > 0 {
		n = copy(b, s.held)
		s.held = s.held[n:]
	} else {
		n, err = c.readConn(b)
	}
	if s.done {
		return n, err
	}
	k, over, ferr := s.follow(b[:n], c)
	if k < n {
		s.held = append(append([]byte(nil), b[k:n]...), s.held...)
	}
	if over {
		if s.v5 {
			c.refuseTooLarge(s.max)
		}
		s.done = true
	}
	if ferr != nil {
		err = ferr
	}
	if err != nil && s.claims != nil {
		s.claims.release()
	}
	return k, err
}

// over follows b, the bytes just read, and reports whether a fixed header
// in it claims more than max, as mochi judges it: remaining length plus
// one. Nothing is claimed.
func (s *sizeGuard) over(b []byte) bool {
	_, over, _ := s.follow(b, nil)
	return over
}

// follow follows b and returns how many of its bytes may be handed on:
// all of them, unless a fixed header's claim does not fit the budget
// after other bytes, which then stop before that header's last byte; a
// header's claim at b's first byte waits for room instead. over reports
// a fixed header past max; a remaining length mochi cannot decode ends
// the connection too: nothing more is followed.
func (s *sizeGuard) follow(b []byte, c *corkConn) (k int, over bool, err error) {
	for i := 0; i < len(b); {
		if s.body > 0 {
			n := min(s.body, len(b)-i)
			s.body -= n
			i += n
			s.bodyRead()
			continue
		}
		s.hdr[s.n] = b[i]
		s.n++
		if s.n == 1 || s.hdr[s.n-1]&0x80 != 0 && s.n < 5 {
			i++
			continue
		}
		// The length as mochi reads it, with its own decoder.
		remaining, _, derr := packets.DecodeLength(bytes.NewReader(s.hdr[1:s.n]))
		if derr != nil {
			s.n, s.done = 0, true
			return len(b), false, nil
		}
		if s.max > 0 && remaining+1 > int(s.max) {
			s.n = 0
			return len(b), true, nil
		}
		if s.claims != nil && s.claiming && int64(remaining) >= claimBounds.small.Load() {
			wait := time.Duration(0)
			if i == 0 {
				wait = time.Duration(claimBounds.wait.Load())
			}
			ok, cerr := s.claims.take(int64(remaining), wait, c)
			if cerr != nil {
				return 0, false, cerr
			}
			if !ok {
				s.n-- // this byte comes again, with the next read
				return i, false, nil
			}
		}
		s.n = 0
		s.body = remaining
		i++
	}
	return len(b), false, nil
}

// refuseTooLarge answers a packet past max with DISCONNECT 0x95, after
// what was corked (it was written before) and ahead of what a gate holds
// (the connection ends, so it never goes), then fails every later write:
// mochi closes the connection as it reads the packet's header, and
// nothing may follow a DISCONNECT.
func (c *corkConn) refuseTooLarge(max uint32) {
	pk := packets.Packet{
		FixedHeader:     packets.FixedHeader{Type: packets.Disconnect},
		ProtocolVersion: 5,
		ReasonCode:      CodePacketTooLarge,
		Properties:      packets.Properties{ReasonString: fmt.Sprintf("packet larger than the maximum packet size, %d bytes", max)},
	}
	var buf bytes.Buffer
	if err := pk.DisconnectEncode(&buf); err != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	if c.gates == 0 && len(c.buf) > 0 {
		_ = c.flushLocked()
	}
	c.buf = nil
	if c.err == nil {
		// A client that reads nothing does not hold the reader here.
		_ = c.Conn.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = c.Conn.Write(buf.Bytes())
	}
	c.err = errPacketTooLarge
	if c.lifted != nil {
		c.lifted.Broadcast() // a write waiting for a gate fails now
	}
}

// bodyRead notes that bytes of the current packet's body were read: a
// claimed one gives its claim back once whole, and starts its stall watch
// again until then.
func (s *sizeGuard) bodyRead() {
	if s.claims == nil || s.claims.held.Load() == 0 {
		return
	}
	if s.body == 0 {
		s.claims.release()
	} else {
		s.claims.progress()
	}
}
