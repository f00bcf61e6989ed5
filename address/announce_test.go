package address

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/petrelmq/petrel/message"
)

var testID = message.NodeID{0xaa, 15: 0x01}

// tcpConn is an announced tcp connector to host:port.
func tcpConn(name, host string, port int32, extra ...Param) AnnouncedConnector {
	return AnnouncedConnector{Name: name, Factory: "tcp", Params: append([]Param{
		{Key: "host", Value: host}, {Key: "port", Value: port},
	}, extra...)}
}

func TestAnnouncementRoundTrip(t *testing.T) {
	backup := tcpConn("b", "10.0.0.2", 1)
	tests := []struct {
		name string
		a    Announcement
	}{
		{"no pairs", Announcement{Name: "n", ID: testID}},
		{"one", Announcement{Name: "n", ID: testID, Pairs: []ConnectorPair{{Main: tcpConn("c1", "h", 7400)}}}},
		{"backup", Announcement{Name: "n", ID: testID, Pairs: []ConnectorPair{{Main: tcpConn("c1", "h", 7400), Backup: &backup}}}},
		{"no params", Announcement{Name: "n", ID: testID, Pairs: []ConnectorPair{{Main: AnnouncedConnector{Name: "x", Factory: "future"}}}}},
		{"longest strings", Announcement{Name: strings.Repeat("n", 128), ID: testID, Pairs: []ConnectorPair{{Main: AnnouncedConnector{
			Name: strings.Repeat("c", 255), Factory: strings.Repeat("f", 255),
			Params: []Param{{Key: strings.Repeat("k", 255), Value: strings.Repeat("v", 255)}},
		}}}}},
	}
	for _, tt := range tests {
		for _, secret := range [][]byte{nil, testSecret} {
			t.Run(tt.name, func(t *testing.T) {
				b, err := tt.a.AppendBinary([]byte("prefix"), secret)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.HasPrefix(b, []byte("prefix")) {
					t.Fatal("AppendBinary did not append")
				}
				got, err := DecodeAnnouncement(b[len("prefix"):], secret)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, tt.a) {
					t.Fatalf("got %#v, want %#v", got, tt.a)
				}
			})
		}
	}
}

func TestAnnouncementEncodeErrors(t *testing.T) {
	many := func(n int, f func(i int) Param) []Param {
		ps := make([]Param, n)
		for i := range ps {
			ps[i] = f(i)
		}
		return ps
	}
	one := func(c AnnouncedConnector) []ConnectorPair { return []ConnectorPair{{Main: c}} }
	tests := []struct {
		name string
		a    Announcement
		want string
	}{
		{"bad name", Announcement{Name: "-x", ID: testID}, "node name"},
		{"empty name", Announcement{Name: "", ID: testID}, "node name"},
		{"zero id", Announcement{Name: "n"}, "zero node id"},
		{"17 pairs", Announcement{Name: "n", ID: testID, Pairs: make([]ConnectorPair, 17)}, "17 connector pairs"},
		{"empty connector name", Announcement{Name: "n", ID: testID, Pairs: one(AnnouncedConnector{Factory: "tcp"})}, "connector name is empty"},
		{"empty factory", Announcement{Name: "n", ID: testID, Pairs: one(AnnouncedConnector{Name: "c"})}, "factory is empty"},
		{"long factory", Announcement{Name: "n", ID: testID, Pairs: one(AnnouncedConnector{Name: "c", Factory: strings.Repeat("f", 256)})}, "256 bytes"},
		{"33 params", Announcement{Name: "n", ID: testID, Pairs: one(AnnouncedConnector{Name: "c", Factory: "tcp",
			Params: many(33, func(i int) Param { return Param{Key: string(rune('A' + i)), Value: true} })})}, "33 parameters"},
		{"duplicate key", Announcement{Name: "n", ID: testID, Pairs: one(tcpConn("c", "h", 1, Param{Key: "host", Value: "x"}))}, `"host" given twice`},
		{"int value", Announcement{Name: "n", ID: testID, Pairs: one(tcpConn("c", "h", 1, Param{Key: "k", Value: 5}))}, "type int"},
		{"long value", Announcement{Name: "n", ID: testID, Pairs: one(tcpConn("c", "h", 1, Param{Key: "k", Value: strings.Repeat("v", 256)}))}, "256 bytes"},
		{"bad backup", Announcement{Name: "n", ID: testID, Pairs: []ConnectorPair{{Main: tcpConn("c", "h", 1), Backup: &AnnouncedConnector{}}}}, "pair 1 backup"},
		{"too big", Announcement{Name: "n", ID: testID, Pairs: one(AnnouncedConnector{Name: "c", Factory: "tcp",
			Params: many(6, func(i int) Param { return Param{Key: string(rune('a' + i)), Value: strings.Repeat("v", 255)} })})}, "more than the 1400"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := []byte("keep")
			got, err := tt.a.AppendBinary(dst, nil)
			if !errors.Is(err, ErrAnnouncement) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one with %q wrapping ErrAnnouncement", err, tt.want)
			}
			if string(got) != "keep" {
				t.Fatalf("dst changed to %q", got)
			}
		})
	}
}

func TestDecodeAnnouncementErrors(t *testing.T) {
	single, _ := goldenCases[0].a.AppendBinary(nil, nil)
	signed, _ := goldenCases[1].a.AppendBinary(nil, testSecret)
	withSeq := goldenCases[0].a
	withSeq.Seq = 1733356800000000001
	seq, _ := withSeq.AppendBinary(nil, nil)
	signedSeq, _ := withSeq.AppendBinary(nil, testSecret)
	edit := func(b []byte, f func([]byte) []byte) []byte { return f(bytes.Clone(b)) }
	tests := []struct {
		name   string
		packet []byte
		secret []byte
		want   error
		msg    string
	}{
		{"empty", nil, nil, ErrAnnouncement, "not a Petrel announcement"},
		{"foreign", []byte("GET / HTTP/1.1\r\n"), nil, ErrAnnouncement, "not a Petrel announcement"},
		{"version 3", edit(single, func(b []byte) []byte { b[4] = 3; return b }), nil, ErrAnnouncement, "version 3"},
		{"version 0", edit(single, func(b []byte) []byte { b[4] = 0; return b }), nil, ErrAnnouncement, "version 0"},
		// Sequence at 29..36 in version 2.
		{"zero sequence", edit(seq, func(b []byte) []byte { clear(b[29:37]); return b }), nil, ErrAnnouncement, "sequence is zero"},
		{"truncated sequence", seq[:33], nil, ErrAnnouncement, "sequence needs 8 bytes"},
		{"tampered sequence", edit(signedSeq, func(b []byte) []byte { b[36]++; return b }), testSecret, ErrAnnouncementMAC, "another secret"},
		{"truncated", single[:40], nil, ErrAnnouncement, "remain"},
		{"trailing", append(bytes.Clone(single), 7), nil, ErrAnnouncement, "1 bytes after the end"},
		{"oversize", make([]byte, 1401), nil, ErrAnnouncement, "1401 bytes"},
		{"bad name", edit(single, func(b []byte) []byte { b[6] = '.'; return b }), nil, ErrAnnouncement, "node name"},
		{"zero id", edit(single, func(b []byte) []byte { clear(b[13:29]); return b }), nil, ErrAnnouncement, "node id is zero"},
		{"17 pairs", edit(single, func(b []byte) []byte { b[29] = 17; return b }), nil, ErrAnnouncement, "17 connector pairs"},
		{"pairs cannot fit", edit(single, func(b []byte) []byte { b[29] = 16; return b }), nil, ErrAnnouncement, "cannot fit"},
		{"params cannot fit", edit(single, func(b []byte) []byte { b[37] = 32; return b }), nil, ErrAnnouncement, "cannot fit"},
		{"empty connector name", edit(single, func(b []byte) []byte { b[30] = 0; return b }), nil, ErrAnnouncement, "connector name is empty"},
		{"bad type", edit(single, func(b []byte) []byte { b[43] = 4; return b }), nil, ErrAnnouncement, "has type 4"},
		// The host's type becomes bool, so its length byte, 9, is the value.
		{"bad bool", edit(single, func(b []byte) []byte { b[43] = 0; return b }), nil, ErrAnnouncement, "neither 0 nor 1"},
		{"bad has-backup", edit(single, func(b []byte) []byte { b[len(b)-2] = 9; return b }), nil, ErrAnnouncement, "has-backup"},
		{"mac of 31", edit(signed, func(b []byte) []byte { b[len(b)-33] = 31; return b[:len(b)-1] }), nil, ErrAnnouncement, "MAC of 31 bytes"},
		{"unsigned, secret", single, testSecret, ErrAnnouncementMAC, "no MAC"},
		{"wrong secret", signed, []byte("other"), ErrAnnouncementMAC, "another secret"},
		{"tampered", edit(signed, func(b []byte) []byte { b[10] = 'X'; return b }), testSecret, ErrAnnouncementMAC, "another secret"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := DecodeAnnouncement(tt.packet, tt.secret)
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("err = %v, want one with %q wrapping %v", err, tt.msg, tt.want)
			}
			if !reflect.DeepEqual(a, Announcement{}) {
				t.Fatalf("got %#v with the error", a)
			}
			if tt.want == ErrAnnouncementMAC && errors.Is(err, ErrAnnouncement) {
				t.Fatal("a MAC error also wraps ErrAnnouncement")
			}
		})
	}
}

// TestDecodeSignedWithoutSecret: a node without a secret reads a signed
// announcement, whose MAC it cannot check.
func TestDecodeSignedWithoutSecret(t *testing.T) {
	signed, _ := goldenCases[1].a.AppendBinary(nil, testSecret)
	got, err := DecodeAnnouncement(signed, nil)
	if err != nil || !reflect.DeepEqual(got, goldenCases[1].a) {
		t.Fatalf("got %#v, %v", got, err)
	}
}

func TestAnnouncementFor(t *testing.T) {
	tests := []struct {
		uri   string
		pairs int
		back  string // what Announcement.Connectors gives back
	}{
		{"tcp://10.0.0.1:7400", 1, ""},
		{"tls://[::1]:7443?ca=/etc/ca.pem&verify=full", 1, ""},
		{"failover:(tcp://main:1,tls://backup:2?ca=x)", 1, ""},
		{"static:(tcp://a:1,tcp://b:2,tcp://c:3)", 3, ""},
		{"static:(tcp://a:1)", 1, "tcp://a:1"},
		{"tcp://[fe80::1%25eth0]:7400", 1, ""},
	}
	for _, tt := range tests {
		t.Run(tt.uri, func(t *testing.T) {
			cs := mustConnectors(t, tt.uri)
			a := AnnouncementFor("n", testID, cs)
			if len(a.Pairs) != tt.pairs {
				t.Fatalf("%d pairs, want %d: %#v", len(a.Pairs), tt.pairs, a)
			}
			b, err := a.AppendBinary(nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			decoded, err := DecodeAnnouncement(b, nil)
			if err != nil {
				t.Fatal(err)
			}
			back, err := decoded.Connectors()
			want := cs.String()
			if tt.back != "" {
				want = tt.back
			}
			if err != nil || back.String() != want {
				t.Fatalf("Connectors() = %s, %v; want %s", back, err, want)
			}
			checkInvariants(t, back)
		})
	}
}

func TestAnnouncementForReservedParam(t *testing.T) {
	a := AnnouncementFor("n", testID, mustConnectors(t, "tcp://h:1?port=2"))
	if _, err := a.AppendBinary(nil, nil); !errors.Is(err, ErrAnnouncement) {
		t.Fatalf("a connector option named port encoded: %v", err)
	}
}

func TestAnnouncedConnector(t *testing.T) {
	tests := []struct {
		name string
		c    AnnouncedConnector
		want string // the connector, or the error's text
	}{
		{"tcp", tcpConn("c", "10.0.0.1", 7400), "tcp://10.0.0.1:7400"},
		{"ipv6", tcpConn("c", "2001:db8::1", 7400), "tcp://[2001:db8::1]:7400"},
		{"ipv6 canonical", tcpConn("c", "2001:DB8:0:0::1", 7400), "tcp://[2001:db8::1]:7400"},
		{"typed options", tcpConn("c", "h", 1, Param{Key: "a", Value: true}, Param{Key: "b", Value: int32(-1)}, Param{Key: "c", Value: int64(1 << 40)}, Param{Key: "d", Value: "x y"}),
			"tcp://h:1?a=true&b=-1&c=1099511627776&d=x%20y"},
		{"unknown factory", AnnouncedConnector{Name: "c", Factory: "udp"}, `unknown factory "udp"`},
		{"no port", AnnouncedConnector{Name: "c", Factory: "tcp", Params: []Param{{Key: "host", Value: "h"}}}, "want a host string parameter and a port int32"},
		{"port as string", AnnouncedConnector{Name: "c", Factory: "tcp", Params: []Param{{Key: "host", Value: "h"}, {Key: "port", Value: "1"}}}, "port int32"},
		{"port 0", tcpConn("c", "h", 0), "port"},
		{"port 65536", tcpConn("c", "h", 65536), "port"},
		{"host with query", tcpConn("c", "h?x=1", 1), "host"},
		{"host with path", tcpConn("c", "h/x", 1), "unexpected"},
		{"host with colon", tcpConn("c", "h:2", 1), "IPv6"},
		{"empty host", tcpConn("c", "", 1), "host"},
		{"bad option name", tcpConn("c", "h", 1, Param{Key: "a b", Value: "x"}), "parameter name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := tt.c.Connector()
			if err != nil {
				if !errors.Is(err, ErrConnector) || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("err = %v, want one with %q wrapping ErrConnector", err, tt.want)
				}
				return
			}
			if c.String() != tt.want {
				t.Fatalf("got %s, want %s", c, tt.want)
			}
			// What an announcement gives obeys ParseConnectors.
			again, err := ParseConnectors(c.String())
			if err != nil || !reflect.DeepEqual(again.List[0], c) {
				t.Fatalf("%s parses to %#v, %v", c, again, err)
			}
		})
	}
}

func TestPairConnectors(t *testing.T) {
	same := tcpConn("b", "h", 1)
	if _, err := (ConnectorPair{Main: tcpConn("a", "h", 1), Backup: &same}).Connectors(); !errors.Is(err, ErrConnector) {
		t.Errorf("backup equal to main: err = %v", err)
	}
	bad := AnnouncedConnector{Name: "b", Factory: "quic"}
	if _, err := (ConnectorPair{Main: tcpConn("a", "h", 1), Backup: &bad}).Connectors(); !errors.Is(err, ErrConnector) {
		t.Errorf("unusable backup: err = %v", err)
	}
}

func TestAnnouncementConnectors(t *testing.T) {
	quic := AnnouncedConnector{Name: "q", Factory: "quic"}
	b := tcpConn("b", "b", 2)
	tests := []struct {
		name  string
		pairs []ConnectorPair
		want  string // or the error's text
	}{
		{"none", nil, "announces no connectors"},
		{"unusable only", []ConnectorPair{{Main: quic}}, `unknown factory "quic"`},
		{"unusable skipped", []ConnectorPair{{Main: quic}, {Main: tcpConn("a", "a", 1)}}, "tcp://a:1"},
		{"two pairs with backups", []ConnectorPair{{Main: tcpConn("a", "a", 1), Backup: &b}, {Main: tcpConn("c", "c", 3)}},
			"static:(tcp://a:1,tcp://b:2,tcp://c:3)"},
		{"repeats dropped", []ConnectorPair{{Main: tcpConn("a", "a", 1), Backup: &b}, {Main: tcpConn("b2", "b", 2)}},
			"static:(tcp://a:1,tcp://b:2)"},
		{"repeats to one", []ConnectorPair{{Main: tcpConn("a", "a", 1)}, {Main: tcpConn("a2", "a", 1)}}, "tcp://a:1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs, err := Announcement{Name: "n", ID: testID, Pairs: tt.pairs}.Connectors()
			if err != nil {
				if !errors.Is(err, ErrConnector) || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("err = %v, want %q", err, tt.want)
				}
				return
			}
			if cs.String() != tt.want {
				t.Fatalf("got %s, want %s", cs, tt.want)
			}
			checkInvariants(t, cs)
		})
	}
}
