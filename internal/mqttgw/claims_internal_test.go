package mqttgw

import (
	"bytes"
	"net"
	"testing"
	"time"
)

// With the budget full, the reader hands mochi a large packet's fixed
// header but for its last byte, so that mochi allocates nothing; the
// byte comes once the budget has room, the packet's bytes claimed.
func TestSizeGuardHoldsBackHeader(t *testing.T) {
	defer SetPacketBounds(1<<20, 64<<10, 10*time.Second, time.Minute)()
	all := &packetClaims{}
	all.used.Store(1 << 20)
	client, server := net.Pipe()
	cc := &corkConn{Conn: server, size: &sizeGuard{claims: newClaim(all), claiming: true}}
	defer cc.Close()
	defer client.Close()
	// A PUBLISH of 65,536 bytes: type, three bytes of length, then its body.
	go func() { _, _ = client.Write([]byte{0x30, 0x80, 0x80, 0x04, 'x'}) }()
	buf := make([]byte, 64)
	n, err := cc.Read(buf)
	if err != nil || !bytes.Equal(buf[:n], []byte{0x30, 0x80, 0x80}) {
		t.Fatalf("first read %x, %v; want the header but its last byte", buf[:n], err)
	}
	type result struct {
		b   []byte
		err error
	}
	got := make(chan result, 1)
	go func() {
		n, err := cc.Read(buf)
		got <- result{buf[:n], err}
	}()
	all.give(1 << 20)
	r := <-got
	if r.err != nil || !bytes.Equal(r.b, []byte{0x04, 'x'}) {
		t.Fatalf("second read %x, %v; want the header's last byte and the body's first", r.b, r.err)
	}
	if used := all.used.Load(); used != 65536 {
		t.Fatalf("%d bytes claimed, want 65536", used)
	}
	_ = cc.Close()
	if used := all.used.Load(); used != 0 {
		t.Fatalf("%d bytes claimed once closed, want 0", used)
	}
}
