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
// headers, so that an MQTT 5 client whose packet passes the Maximum
// Packet Size gets DISCONNECT 0x95 (4.13) before its connection closes.
// mochi refuses such a packet as it reads its fixed header
// (Client.ReadFixedHeader), before any hook sees it, and closes the
// connection before OnDisconnect runs: only the reader beneath mochi sees
// it come. Only the reading goroutine uses it.
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
}

// over follows b, the bytes just read, and reports whether a fixed header
// in it claims more than max, as mochi judges it: remaining length plus
// one. A remaining length mochi cannot decode ends the connection too:
// nothing more is followed.
func (s *sizeGuard) over(b []byte) bool {
	for len(b) > 0 {
		if s.body > 0 {
			k := min(s.body, len(b))
			s.body -= k
			b = b[k:]
			continue
		}
		s.hdr[s.n] = b[0]
		s.n++
		b = b[1:]
		if s.n == 1 || s.hdr[s.n-1]&0x80 != 0 && s.n < 5 {
			continue
		}
		// The length as mochi reads it, with its own decoder.
		remaining, _, err := packets.DecodeLength(bytes.NewReader(s.hdr[1:s.n]))
		s.n = 0
		if err != nil {
			s.body = int(^uint(0) >> 1)
			return false
		}
		if s.max > 0 && remaining+1 > int(s.max) {
			return true
		}
		s.body = remaining
	}
	return false
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
