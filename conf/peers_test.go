package conf

import (
	"os"
	"path/filepath"
	"testing"

	petrel "github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/message"
)

func TestParsePeers(t *testing.T) {
	dir := t.TempDir()
	plantFile := filepath.Join(dir, "plant-7.secret")
	hubFile := filepath.Join(dir, "hub-1.secret")
	for path, s := range map[string]string{plantFile: "plant secret\n", hubFile: "hub secret\n"} {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	const pin = "0123456789abcdef0123456789abcdef"
	doc := "node:\n  name: central\n" +
		"nodes:\n  - {name: hub-1, connector: 'tcp://h:1', secret_file: " + hubFile + "}\n" +
		"peers:\n" +
		"  - {name: plant-7, secret_file: " + plantFile + ", id: " + pin + "}\n" +
		"  - {name: hub-1, secret: inline, kind: node, relay: true}\n" +
		"  - {name: app-1, secret: app, kind: client}\n"
	f, err := Parse("petrel.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	cfg := f.NodeConfig()
	id, _ := message.ParseNodeID(pin)
	want := []petrel.PeerConfig{
		{Name: "plant-7", Secret: "plant secret", ID: id},
		{Name: "hub-1", Secret: "inline", Kind: petrel.PeerKindNode, Relay: true},
		{Name: "app-1", Secret: "app", Kind: petrel.PeerKindClient},
	}
	if len(cfg.Peers) != len(want) {
		t.Fatalf("peers %+v, want %+v", cfg.Peers, want)
	}
	for i := range want {
		if cfg.Peers[i] != want[i] {
			t.Errorf("peers[%d] = %+v, want %+v", i, cfg.Peers[i], want[i])
		}
	}
	if cfg.Nodes[0].Secret != "hub secret" {
		t.Errorf("nodes[0] secret %q, want the file's", cfg.Nodes[0].Secret)
	}
	if s := f.Peers[0].Secret.String(); s != "[redacted]" {
		t.Errorf("a peer's secret prints as %q", s)
	}
}

func TestParsePeerErrors(t *testing.T) {
	const head = "node:\n  name: central\npeers:\n" // lines 1-3
	tests := []struct {
		name      string
		doc       string
		line, col int
		field     string
		reason    string
	}{
		{"missing name", head + "  - {secret: s}\n", 4, 5, "peers[0]", "a peer needs a name"},
		{"invalid name", head + "  - {name: '../x', secret: s}\n", 4, 6, "peers[0].name", `starts with '.'`},
		{"name with a space", head + "  - {name: 'plant 7', secret: s}\n", 4, 6, "peers[0].name", "plant 7"},
		{"bad kind", head + "  - {name: a, secret: s, kind: admin}\n", 4, 26, "peers[0].kind", `"admin": want node or client`},
		{"duplicate names", head + "  - {name: a, secret: s}\n  - {name: a, secret: t}\n", 5, 6, "peers[1].name", `identity "a" is listed twice`},
		{"bad id pin", head + "  - {name: a, secret: s, id: plant-7}\n", 4, 26, "peers[0].id", "is not a node id"},
		{"short id pin", head + "  - {name: a, secret: s, id: '0123'}\n", 4, 26, "peers[0].id", "is not a node id"},
		{"secret and secret_file", head + "  - {name: a, secret: s, secret_file: /x}\n", 4, 26, "peers[0].secret_file", "not both"},
		{"empty secret", head + "  - {name: a, secret: ''}\n", 4, 15, "peers[0].secret", "must not be empty"},
		{"missing secret_file", head + "  - {name: a, secret_file: /nonexistent/petrel.secret}\n", 4, 15, "peers[0].secret_file", "cannot read"},
		// The rules across sections are petrel.Config.Validate's.
		{"no secret without mutual TLS", head + "  - {name: a}\n", 4, 5, "peers[0].secret", `identity "a" has no secret`},
		{"this node", head + "  - {name: central, secret: s}\n", 4, 6, "peers[0].name", `"central" is this node itself`},
		{"client relay", head + "  - {name: a, secret: s, kind: client, relay: true}\n", 4, 40, "peers[0].relay", "a client identity cannot relay"},
		{"id pinned twice", head + "  - {name: a, secret: s, id: 0123456789abcdef0123456789abcdef}\n  - {name: b, secret: s, id: 0123456789abcdef0123456789abcdef}\n",
			5, 26, "peers[1].id", `pinned to identity "a" already`},
		{"node secret empty", "nodes:\n  - {name: hub-1, connector: 'tcp://h:1', secret: ''}\n", 2, 43, "nodes[0].secret", "must not be empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Parse("petrel.yaml", []byte(tt.doc))
			if err == nil {
				t.Fatalf("Parse succeeded: %+v", f)
			}
			wantError(t, err, tt.line, tt.col, tt.field, nil, tt.reason)
		})
	}
}
