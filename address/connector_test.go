package address

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func tcp(addr string) Connector { return Connector{Scheme: SchemeTCP, Addr: addr} }

func TestParseConnectors(t *testing.T) {
	tests := []struct {
		in    string
		want  Connectors
		canon string // String(); "" means in itself
	}{
		{"tcp://127.0.0.1:7400", Connectors{ModeSingle, []Connector{tcp("127.0.0.1:7400")}}, ""},
		{"tcp://hub-1.example.com:7400", Connectors{ModeSingle, []Connector{tcp("hub-1.example.com:7400")}}, ""},
		{"  tcp://h:1 \n", Connectors{ModeSingle, []Connector{tcp("h:1")}}, "tcp://h:1"},
		{"tcp://h:65535", Connectors{ModeSingle, []Connector{tcp("h:65535")}}, ""},
		{"tcp://h:07400", Connectors{ModeSingle, []Connector{tcp("h:7400")}}, "tcp://h:7400"},
		{"tcp://[::1]:7400", Connectors{ModeSingle, []Connector{tcp("[::1]:7400")}}, ""},
		{"tcp://[0:0::1]:7400", Connectors{ModeSingle, []Connector{tcp("[::1]:7400")}}, "tcp://[::1]:7400"},
		{"tcp://[fe80::1%eth0]:7400", Connectors{ModeSingle, []Connector{tcp("[fe80::1%eth0]:7400")}}, ""},
		{"tcp://[::ffff:10.0.0.1]:1", Connectors{ModeSingle, []Connector{tcp("[::ffff:10.0.0.1]:1")}}, ""},
		{"tls://h:7400?ca=/etc/petrel/ca.pem", Connectors{ModeSingle, []Connector{{SchemeTLS, "h:7400", map[string]string{"ca": "/etc/petrel/ca.pem"}}}}, ""},
		{"tls://h:1?z=1&a=b%20c&empty=", Connectors{ModeSingle, []Connector{{SchemeTLS, "h:1", map[string]string{"z": "1", "a": "b c", "empty": ""}}}},
			"tls://h:1?a=b%20c&empty=&z=1"},
		{"tls://h:1?flag", Connectors{ModeSingle, []Connector{{SchemeTLS, "h:1", map[string]string{"flag": ""}}}}, "tls://h:1?flag="},
		{"tls://h:1?v=a%2Cb%29+c%2B", Connectors{ModeSingle, []Connector{{SchemeTLS, "h:1", map[string]string{"v": "a,b) c+"}}}}, "tls://h:1?v=a%2Cb%29%20c%2B"},
		{"static:(tcp://a:1)", Connectors{ModeStatic, []Connector{tcp("a:1")}}, ""},
		{"static:( tcp://a:1 , tls://b:2?x=1 ,tcp://c:3)", Connectors{ModeStatic, []Connector{tcp("a:1"), {SchemeTLS, "b:2", map[string]string{"x": "1"}}, tcp("c:3")}},
			"static:(tcp://a:1,tls://b:2?x=1,tcp://c:3)"},
		{"static: (tcp://a:1)", Connectors{ModeStatic, []Connector{tcp("a:1")}}, "static:(tcp://a:1)"},
		{"failover:(tcp://main:1,tcp://backup:2)", Connectors{ModeFailover, []Connector{tcp("main:1"), tcp("backup:2")}}, ""},
		{"failover:(tcp://[::1]:1,\ttcp://[::2]:1)", Connectors{ModeFailover, []Connector{tcp("[::1]:1"), tcp("[::2]:1")}}, "failover:(tcp://[::1]:1,tcp://[::2]:1)"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseConnectors(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("ParseConnectors = %#v, want %#v", got, tt.want)
			}
			canon := tt.canon
			if canon == "" {
				canon = tt.in
			}
			if s := got.String(); s != canon {
				t.Errorf("String() = %q, want %q", s, canon)
			}
			again, err := ParseConnectors(got.String())
			if err != nil || !reflect.DeepEqual(again, got) {
				t.Errorf("ParseConnectors(String()) = %#v, %v; want %#v", again, err, got)
			}
		})
	}
}

func TestParseConnectorsErrors(t *testing.T) {
	tests := []struct {
		in, want string // want is the whole error text
	}{
		{"", `connector "": empty (want tcp://host:port, tls://host:port, static:(...) or failover:(...)): invalid connector`},
		{"   ", `connector "   ": empty`},
		{"tcp://host", `connector "tcp://host": missing port: invalid connector`},
		{"tcp://host:", `connector "tcp://host:": missing port`},
		{"tcp://:7400", `connector "tcp://:7400": missing host`},
		{"tcp://", `connector "tcp://": missing host and port`},
		{"host:7400", `connector "host:7400": want scheme://host:port, such as tcp://127.0.0.1:7400`},
		{"udp://h:1", `connector "udp://h:1": unknown scheme "udp" (want tcp or tls)`},
		{"TCP://h:1", `unknown scheme "TCP"`},
		{"://h:1", `missing scheme`},
		{"tcp://h:0", `port "0" is not a number from 1 to 65535`},
		{"tcp://h:65536", `port "65536" is not a number from 1 to 65535`},
		{"tcp://h:123456", `port "123456"`},
		{"tcp://h:-1", `port "-1"`},
		{"tcp://h:http", `port "http"`},
		{"tcp://h:1/path", `unexpected "/path" after the port`},
		{"tcp://h:1#frag", `unexpected "#frag"`},
		{"tcp://::1:7400", `IPv6 address "::1" needs brackets, as in [::1]:7400`},
		{"tcp://[::1]", `missing port`},
		{"tcp://[::1:7400", `missing ']' after the IPv6 address`},
		{"tcp://[::1]7400", `unexpected "7400" after ']'`},
		{"tcp://[10.0.0.1]:1", `"10.0.0.1" in brackets is not an IPv6 address`},
		{"tcp://[host]:1", `"host" in brackets is not an IPv6 address`},
		{"tcp://[fe80::1%e(0]:1", `IPv6 zone "e(0" is not an interface name`},
		{"tcp://[fe80::1%e 0]:1", `IPv6 zone "e 0" is not an interface name`},
		{"tcp://a]:1", `has a ']' without '['`},
		{"tcp://my host:1", `host "my host" is not a host name or an IP address`},
		{"tcp://user@h:1", `host "user@h" is not a host name`},
		{"tcp://h:1?", `'?' with no parameters after it`},
		{"tcp://h:1?a=1&", `empty parameter`},
		{"tcp://h:1?a=1&&b=2", `empty parameter`},
		{"tcp://h:1?=1", `parameter name ""`},
		{"tcp://h:1?a b=1", `parameter name "a b"`},
		{"tcp://h:1?a=1&a=2", `parameter "a" given twice`},
		{"tcp://h:1?a=%zz", `parameter "a": bad %-escape in "%zz"`},
		{"static:()", `connector "static:()": static list has no connectors`},
		{"static:( )", `static list has no connectors`},
		{"static:tcp://a:1", `want a list in parentheses, as in static:(tcp://a:7400,tcp://b:7400)`},
		{"static:(tcp://a:1", `want a list in parentheses`},
		{"static:(tcp://a:1,)", `item 2 of the list is empty`},
		{"static:(tcp://a:1,,tcp://b:1)", `item 2 of the list is empty`},
		{"static:(tcp://a:1,tcp://b)", `connector "tcp://b": missing port: invalid connector`},
		{"static:(tcp://a:1,tcp://a:01)", `"tcp://a:1" is listed twice`},
		{"static:(static:(tcp://a:1))", `lists do not nest`},
		{"failover:(tcp://a:1,static:(tcp://b:1))", `lists do not nest`},
		{"failover:(tcp://a:1)", `failover needs exactly 2 connectors, a main and a backup, not 1`},
		{"failover:(tcp://a:1,tcp://b:1,tcp://c:1)", `not 3`},
		{"random:(tcp://a:1)", `unknown list kind "random" (want static or failover)`},
		{"Static:(tcp://a:1)", `unknown list kind "Static"`},
		{"tcp://a:1,tcp://b:1", `several connectors go in a list: static:(...) or failover:(...)`},
		{"tcp://" + strings.Repeat("a", 254) + ":1", `is not a host name`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseConnectors(tt.in)
			if err == nil {
				t.Fatalf("ParseConnectors = %v, want an error", got)
			}
			if !errors.Is(err, ErrConnector) {
				t.Errorf("error %v does not wrap ErrConnector", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
		})
	}
}

func TestModeString(t *testing.T) {
	for m, want := range map[Mode]string{ModeSingle: "single", ModeStatic: "static", ModeFailover: "failover", 7: "mode(7)"} {
		if got := m.String(); got != want {
			t.Errorf("Mode(%d).String() = %q, want %q", int(m), got, want)
		}
	}
}

func TestConnectorsStringZero(t *testing.T) {
	if s := (Connectors{}).String(); s != "" {
		t.Errorf("zero Connectors = %q, want empty", s)
	}
}
