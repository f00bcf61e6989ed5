package address

import (
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
