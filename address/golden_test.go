package address

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/petrelmq/petrel/message"
)

var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/announce and the FuzzDecodeAnnouncement seeds from goldenCases")

// testSecret signs the golden vectors that carry a MAC; testdata/announce/
// README.md gives it too.
var testSecret = []byte("petrel-test-secret")

// goldenCases are the announcements of testdata/announce: name.bin holds the
// bytes, name.json the structure.
var goldenCases = []struct {
	name   string
	secret []byte
	a      Announcement
}{
	{"single", nil, Announcement{
		Name: "plant-7",
		ID:   message.NodeID{0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54, 0x32, 0x10},
		Pairs: []ConnectorPair{{Main: AnnouncedConnector{Name: "c1", Factory: "tcp", Params: []Param{
			{Key: "host", Value: "192.0.2.7"}, {Key: "port", Value: int32(7400)},
		}}}},
	}},
	{"signed", testSecret, Announcement{
		Name: "hub-1",
		ID:   message.NodeID{0: 0x11, 15: 0x01},
		Pairs: []ConnectorPair{{Main: AnnouncedConnector{Name: "c1", Factory: "tcp", Params: []Param{
			{Key: "host", Value: "hub-1.example"}, {Key: "port", Value: int32(7400)},
		}}}},
	}},
	{"failover", nil, Announcement{
		Name: "hub-2",
		ID:   message.NodeID{0: 0x22, 15: 0x02},
		Pairs: []ConnectorPair{{
			Main: AnnouncedConnector{Name: "c1", Factory: "tls", Params: []Param{
				{Key: "host", Value: "2001:db8::2"}, {Key: "port", Value: int32(7443)}, {Key: "ca", Value: "/etc/petrel/ca.pem"},
			}},
			Backup: &AnnouncedConnector{Name: "c1-backup", Factory: "tcp", Params: []Param{
				{Key: "host", Value: "192.0.2.22"}, {Key: "port", Value: int32(7400)},
			}},
		}},
	}},
	{"seq", nil, Announcement{
		Name: "plant-7",
		ID:   message.NodeID{0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54, 0x32, 0x10},
		Seq:  1733356800000000001,
		Pairs: []ConnectorPair{{Main: AnnouncedConnector{Name: "c1", Factory: "tcp", Params: []Param{
			{Key: "host", Value: "192.0.2.7"}, {Key: "port", Value: int32(7400)},
		}}}},
	}},
	{"signed-seq", testSecret, Announcement{
		Name: "hub-1",
		ID:   message.NodeID{0: 0x11, 15: 0x01},
		Seq:  0xfffffffffffffffe,
		Pairs: []ConnectorPair{{Main: AnnouncedConnector{Name: "c1", Factory: "tcp", Params: []Param{
			{Key: "host", Value: "hub-1.example"}, {Key: "port", Value: int32(7401)},
		}}}},
	}},
	{"all-types", testSecret, Announcement{
		Name: "edge-9",
		ID:   message.NodeID{0xff, 0xee, 0xdd, 0xcc, 0xbb, 0xaa, 0x99, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, 0x09},
		Pairs: []ConnectorPair{
			{Main: AnnouncedConnector{Name: "c1", Factory: "tcp", Params: []Param{
				{Key: "host", Value: "192.0.2.9"},
				{Key: "port", Value: int32(7400)},
				{Key: "nodelay", Value: true},
				{Key: "compress", Value: false},
				{Key: "weight", Value: int32(-2)},
				{Key: "max-bytes", Value: int64(-9223372036854775808)},
				{Key: "label", Value: ""},
			}}},
			{Main: AnnouncedConnector{Name: "c2", Factory: "tcp", Params: []Param{
				{Key: "host", Value: "edge-9.example"}, {Key: "port", Value: int32(7401)},
				{Key: "keepalive-ns", Value: int64(15000000000)},
			}}},
		},
	}},
}

// goldenJSON is the form of name.json. Parameter values are typed by
// "type"; an int64 is a decimal string, since JSON numbers lose precision
// past 2^53 in many languages.
type goldenJSON struct {
	Secret     *string      `json:"secret"` // the secret the MAC is made with; null for none
	Name       string       `json:"name"`
	ID         string       `json:"id"`  // 32 hex digits
	Seq        *string      `json:"seq"` // decimal; null for none (version 1)
	Pairs      []goldenPair `json:"pairs"`
	MAC        *string      `json:"mac"`        // 64 hex digits; null for none
	Connectors string       `json:"connectors"` // what the directory makes of it (Announcement.Connectors)
}

type goldenPair struct {
	Main   goldenConnector  `json:"main"`
	Backup *goldenConnector `json:"backup"`
}

type goldenConnector struct {
	Name    string        `json:"name"`
	Factory string        `json:"factory"`
	Params  []goldenParam `json:"params"`
}

type goldenParam struct {
	Key   string          `json:"key"`
	Type  string          `json:"type"` // "bool", "int32", "int64" or "string"
	Value json.RawMessage `json:"value"`
}

func toGolden(a Announcement, secret, packet []byte) goldenJSON {
	g := goldenJSON{Name: a.Name, ID: a.ID.String(), Pairs: []goldenPair{}}
	if a.Seq != 0 {
		seq := strconv.FormatUint(a.Seq, 10)
		g.Seq = &seq
	}
	if len(secret) > 0 {
		s, mac := string(secret), hex.EncodeToString(packet[len(packet)-macLen:])
		g.Secret, g.MAC = &s, &mac
	}
	for _, p := range a.Pairs {
		gp := goldenPair{Main: toGoldenConnector(p.Main)}
		if p.Backup != nil {
			b := toGoldenConnector(*p.Backup)
			gp.Backup = &b
		}
		g.Pairs = append(g.Pairs, gp)
	}
	cs, err := a.Connectors()
	if err != nil {
		panic(err)
	}
	g.Connectors = cs.String()
	return g
}

func toGoldenConnector(c AnnouncedConnector) goldenConnector {
	g := goldenConnector{Name: c.Name, Factory: c.Factory, Params: []goldenParam{}}
	for _, p := range c.Params {
		var typ string
		var v any = p.Value
		switch x := p.Value.(type) {
		case bool:
			typ = "bool"
		case int32:
			typ = "int32"
		case int64:
			typ, v = "int64", strconv.FormatInt(x, 10)
		case string:
			typ = "string"
		}
		raw, _ := json.Marshal(v)
		g.Params = append(g.Params, goldenParam{Key: p.Key, Type: typ, Value: raw})
	}
	return g
}

func fromGolden(t *testing.T, g goldenJSON) Announcement {
	t.Helper()
	id, err := message.ParseNodeID(g.ID)
	if err != nil {
		t.Fatal(err)
	}
	a := Announcement{Name: g.Name, ID: id}
	if g.Seq != nil {
		if a.Seq, err = strconv.ParseUint(*g.Seq, 10, 64); err != nil {
			t.Fatal(err)
		}
	}
	for _, gp := range g.Pairs {
		p := ConnectorPair{Main: fromGoldenConnector(t, gp.Main)}
		if gp.Backup != nil {
			b := fromGoldenConnector(t, *gp.Backup)
			p.Backup = &b
		}
		a.Pairs = append(a.Pairs, p)
	}
	return a
}

func fromGoldenConnector(t *testing.T, g goldenConnector) AnnouncedConnector {
	t.Helper()
	c := AnnouncedConnector{Name: g.Name, Factory: g.Factory}
	for _, gp := range g.Params {
		p := Param{Key: gp.Key}
		var err error
		switch gp.Type {
		case "bool":
			var v bool
			err = json.Unmarshal(gp.Value, &v)
			p.Value = v
		case "int32":
			var v int32
			err = json.Unmarshal(gp.Value, &v)
			p.Value = v
		case "int64":
			var s string
			var v int64
			if err = json.Unmarshal(gp.Value, &s); err == nil {
				v, err = strconv.ParseInt(s, 10, 64)
			}
			p.Value = v
		case "string":
			var v string
			err = json.Unmarshal(gp.Value, &v)
			p.Value = v
		default:
			err = fmt.Errorf("unknown type %q", gp.Type)
		}
		if err != nil {
			t.Fatalf("parameter %s: %v", gp.Key, err)
		}
		c.Params = append(c.Params, p)
	}
	return c
}

// TestGolden decodes every testdata/announce/*.bin, compares it with the
// .json beside it, and encodes it again to the same bytes. With
// -update-golden it first writes the files from goldenCases.
func TestGolden(t *testing.T) {
	if *updateGolden {
		writeGolden(t)
	}
	bins, err := filepath.Glob(filepath.Join("testdata", "announce", "*.bin"))
	if err != nil || len(bins) < len(goldenCases) {
		t.Fatalf("found %d golden vectors (%v), want %d; run go test -run TestGolden -update-golden", len(bins), err, len(goldenCases))
	}
	for _, bin := range bins {
		name := strings.TrimSuffix(filepath.Base(bin), ".bin")
		t.Run(name, func(t *testing.T) {
			packet := readFile(t, bin)
			var g goldenJSON
			if err := json.Unmarshal(readFile(t, strings.TrimSuffix(bin, ".bin")+".json"), &g); err != nil {
				t.Fatal(err)
			}
			var secret []byte
			if g.Secret != nil {
				secret = []byte(*g.Secret)
			}
			got, err := DecodeAnnouncement(packet, secret)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if want := fromGolden(t, g); !reflect.DeepEqual(got, want) {
				t.Fatalf("decoded\n%#v\nwant\n%#v", got, want)
			}
			if g.MAC != nil && hex.EncodeToString(packet[len(packet)-macLen:]) != *g.MAC {
				t.Errorf("MAC is not the json's %s", *g.MAC)
			}
			cs, err := got.Connectors()
			if err != nil || cs.String() != g.Connectors {
				t.Errorf("Connectors() = %s, %v; want %s", cs, err, g.Connectors)
			}
			again, err := got.AppendBinary(nil, secret)
			if err != nil || !bytes.Equal(again, packet) {
				t.Fatalf("encoded again: %v\n% x\nwant\n% x", err, again, packet)
			}
		})
	}
}

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// writeGolden writes testdata/announce and the fuzz seeds.
func writeGolden(t *testing.T) {
	dir := filepath.Join("testdata", "announce")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	seeds := map[string][]byte{}
	for _, c := range goldenCases {
		packet, err := c.a.AppendBinary(nil, c.secret)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var js bytes.Buffer
		enc := json.NewEncoder(&js)
		enc.SetEscapeHTML(false) // keep the & of connector URIs readable
		enc.SetIndent("", "  ")
		if err := enc.Encode(toGolden(c.a, c.secret, packet)); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, c.name+".bin"), packet)
		writeFile(t, filepath.Join(dir, c.name+".json"), js.Bytes())
		seeds[c.name] = packet
	}
	for name, packet := range nearMisses(seeds["single"], seeds["signed"], seeds["seq"]) {
		seeds[name] = packet
	}
	fuzzDir := filepath.Join("testdata", "fuzz", "FuzzDecodeAnnouncement")
	if err := os.MkdirAll(fuzzDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, packet := range seeds {
		writeFile(t, filepath.Join(fuzzDir, name), fmt.Appendf(nil, "go test fuzz v1\n[]byte(%q)\n", packet))
	}
}

func writeFile(t *testing.T, name string, b []byte) {
	t.Helper()
	if err := os.WriteFile(name, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// nearMisses returns packets that break one rule each, made from the
// single, signed and seq vectors, for the fuzzer to start from.
func nearMisses(single, signed, seq []byte) map[string][]byte {
	edit := func(b []byte, f func([]byte) []byte) []byte { return f(bytes.Clone(b)) }
	// Offsets in single: name "plant-7" at 5..12, id 13..28, pairs 29,
	// connector name at 30, factory at 33, params count at 37, first key 38.
	return map[string][]byte{
		"empty":         {},
		"magic-only":    []byte("PTRL"),
		"foreign":       edit(single, func(b []byte) []byte { b[0] = 'X'; return b }),
		"version-2":     edit(single, func(b []byte) []byte { b[4] = 2; return b }),
		"truncated":     single[:len(single)-3],
		"trailing-byte": append(bytes.Clone(single), 0),
		"name-too-long": edit(single, func(b []byte) []byte { b[5] = 200; return b }),
		"zero-id":       edit(single, func(b []byte) []byte { clear(b[13:29]); return b }),
		"pairs-17":      edit(single, func(b []byte) []byte { b[29] = 17; return b }),
		"params-255":    edit(single, func(b []byte) []byte { b[37] = 255; return b }),
		"bad-type":      edit(single, func(b []byte) []byte { b[38+1+4] = 9; return b }),
		"bad-backup":    edit(single, func(b []byte) []byte { b[len(b)-2] = 2; return b }),
		"mac-31":        edit(signed, func(b []byte) []byte { b[len(b)-33] = 31; return b[:len(b)-1] }),
		"bad-mac":       edit(signed, func(b []byte) []byte { b[len(b)-1] ^= 1; return b }),
		"oversize":      append(bytes.Clone(single), make([]byte, MaxAnnouncementSize)...),
		// In seq the sequence is at 29..36.
		"version-3":     edit(seq, func(b []byte) []byte { b[4] = 3; return b }),
		"seq-zero":      edit(seq, func(b []byte) []byte { clear(b[29:37]); return b }),
		"seq-truncated": seq[:33],
		"seq-as-v1":     edit(seq, func(b []byte) []byte { b[4] = 1; return b }),
	}
}
