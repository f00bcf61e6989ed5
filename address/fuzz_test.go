package address

import (
	"bytes"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// FuzzParseConnectors checks that no input makes ParseConnectors panic, that
// every error wraps ErrConnector, and that whatever it accepts keeps the
// invariants of Connectors and round-trips through String. The seed corpus
// in testdata/fuzz/FuzzParseConnectors holds each form and each near miss.
func FuzzParseConnectors(f *testing.F) {
	f.Add("tcp://127.0.0.1:7400")
	f.Add("failover:(tcp://main:1,tcp://backup:2)")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseConnectors(s)
		if err != nil {
			if !errors.Is(err, ErrConnector) {
				t.Fatalf("error %v does not wrap ErrConnector", err)
			}
			return
		}
		checkInvariants(t, c)
		text := c.String()
		again, err := ParseConnectors(text)
		if err != nil {
			t.Fatalf("ParseConnectors(%q) = %#v, but its String %q does not parse: %v", s, c, text, err)
		}
		if !reflect.DeepEqual(again, c) {
			t.Fatalf("ParseConnectors(%q) = %#v, but String %q parses to %#v", s, c, text, again)
		}
		if again.String() != text {
			t.Fatalf("String is not canonical: %q, then %q", text, again.String())
		}
	})
}

func checkInvariants(t *testing.T, c Connectors) {
	t.Helper()
	n := len(c.List)
	switch {
	case c.Mode == ModeSingle && n != 1,
		c.Mode == ModeStatic && n < 1,
		c.Mode == ModeFailover && n != 2,
		c.Mode < ModeSingle || c.Mode > ModeFailover:
		t.Fatalf("%s with %d connectors", c.Mode, n)
	}
	for _, conn := range c.List {
		if conn.Scheme != SchemeTCP && conn.Scheme != SchemeTLS {
			t.Fatalf("scheme %q", conn.Scheme)
		}
		i := strings.LastIndexByte(conn.Addr, ':')
		port, err := strconv.Atoi(conn.Addr[i+1:])
		if i <= 0 || err != nil || port < 1 || port > 65535 {
			t.Fatalf("addr %q", conn.Addr)
		}
		if conn.Params != nil && len(conn.Params) == 0 {
			t.Fatalf("empty, non-nil Params in %#v", conn)
		}
	}
}

// FuzzDecodeAnnouncement checks that no packet makes DecodeAnnouncement
// panic, that every error wraps ErrAnnouncement or ErrAnnouncementMAC, and
// that what it accepts encodes again to the same bytes: with the secret, the
// packet itself; without one, the packet with its MAC, if any, left off.
// Version 1 decodes to Seq 0 and version 2 to a Seq that is not, so that
// the version is never lost.
// The seed corpus in testdata/fuzz/FuzzDecodeAnnouncement holds the golden
// vectors and near misses of them (go test -run TestGolden -update-golden
// writes it).
func FuzzDecodeAnnouncement(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, secret := range [][]byte{nil, testSecret} {
			a, err := DecodeAnnouncement(b, secret)
			if err != nil {
				if !errors.Is(err, ErrAnnouncement) && !errors.Is(err, ErrAnnouncementMAC) {
					t.Fatalf("error %v wraps neither sentinel", err)
				}
				continue
			}
			if v1 := b[len(AnnouncementMagic)] == AnnouncementVersionNoSeq; v1 != (a.Seq == 0) {
				t.Fatalf("version %d decoded to sequence %d", b[len(AnnouncementMagic)], a.Seq)
			}
			again, err := a.AppendBinary(nil, secret)
			if err != nil {
				t.Fatalf("decoded %#v does not encode: %v", a, err)
			}
			if !bytes.Equal(again, b) && !(secret == nil && isUnsignedOf(again, b)) {
				t.Fatalf("decoded %#v encodes to\n% x\nwant\n% x", a, again, b)
			}
			_, _ = a.Connectors() // must not panic either
		}
	})
}

// isUnsignedOf reports whether unsigned is signed with its MAC left off.
func isUnsignedOf(unsigned, signed []byte) bool {
	body := len(unsigned) - 1 // up to the mac-length byte
	return len(signed) == len(unsigned)+macLen &&
		bytes.Equal(signed[:body], unsigned[:body]) && signed[body] == macLen
}
