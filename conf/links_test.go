package conf

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	petrel "github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/address"
	"github.com/petrelmq/petrel/message"
)

// wantError checks that err is an *Error at line:col for field, matching
// ErrInvalid, target (when not nil) and holding reason.
func wantError(t *testing.T, err error, line, col int, field string, target error, reason string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not an *Error", err, err)
	}
	if e.Line != line || e.Column != col || e.Field != field {
		t.Errorf("at %d:%d %q, want %d:%d %q (%v)", e.Line, e.Column, e.Field, line, col, field, err)
	}
	if !strings.Contains(e.Reason, reason) {
		t.Errorf("reason %q does not contain %q", e.Reason, reason)
	}
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("errors.Is(%v, ErrInvalid) is false", err)
	}
	if target != nil && !errors.Is(err, target) {
		t.Errorf("errors.Is(%v, %v) is false", err, target)
	}
}

// TestParseLinkErrors covers the checks of each link value and item on its
// own.
func TestParseLinkErrors(t *testing.T) {
	const hub = "nodes:\n  - name: hub-1\n    connector: tcp://h:1\n" // lines 1-3
	tests := []struct {
		name      string
		doc       string
		line, col int
		field     string
		target    error
		reason    string
	}{
		{"listen no port", "listen: 7400\n", 1, 1, "listen", nil, `"7400" is not host:port (want host:port, such as 127.0.0.1:7400, or :7400 for every interface)`},
		{"listen named port", "listen: ':http'\n", 1, 1, "listen", nil, `port "http" is not a number from 0 to 65535`},
		{"listen port out of range", "listen: 'h:65536'\n", 1, 1, "listen", nil, `port "65536"`},
		{"listen empty", "listen: ''\n", 1, 1, "listen", nil, "must not be empty (leave it out for no listener)"},
		{"listen ipv6 without brackets", "listen: '::1:7400'\n", 1, 1, "listen", nil, "is not host:port"},
		{"secret empty", "secret: ''\n", 1, 1, "secret", nil, "must not be empty"},
		{"secret_file empty", "secret_file: ''\n", 1, 1, "secret_file", nil, "must not be empty"},
		{"secret and secret_file", "secret: a\nsecret_file: /s\n", 2, 1, "secret_file", nil, "set secret or secret_file, not both"},
		{"secret_file and secret", "secret_file: /s\nsecret: a\n", 2, 1, "secret", nil, "set secret or secret_file, not both"},
		{"secret_file missing", "secret_file: /nonexistent/petrel-secret\n", 1, 1, "secret_file", fs.ErrNotExist,
			`cannot read "/nonexistent/petrel-secret": no such file or directory`},
		{"nodes not a list", "nodes:\n  name: a\n", 1, 1, "nodes", nil, "want a list"},
		{"node without name", "nodes:\n  - connector: tcp://h:1\n", 2, 5, "nodes[0]", nil, "a node needs a name"},
		{"node without connector", "nodes:\n  - name: a\n", 2, 5, "nodes[0]", nil, "a node needs a connector, such as tcp://host:7400"},
		{"node connector null", "nodes:\n  - name: a\n    connector:\n", 2, 5, "nodes[0]", nil, "a node needs a connector"},
		{"node name invalid", "nodes:\n  - name: a b\n    connector: tcp://h:1\n", 2, 5, "nodes[0].name", message.ErrDestination, `name "a b" has ' '`},
		{"connector missing port", hub + "  - name: b\n    connector: tcp://host\n", 5, 5, "nodes[1].connector", address.ErrConnector,
			`connector "tcp://host": missing port`},
		{"connector failover of one", "nodes:\n  - name: a\n    connector: failover:(tcp://h:1)\n", 3, 5, "nodes[0].connector", address.ErrConnector,
			"failover needs exactly 2 connectors"},
		{"connector empty", "nodes:\n  - name: a\n    connector: ''\n", 3, 5, "nodes[0].connector", address.ErrConnector, `connector "": empty`},
		{"connector in a flow mapping", "nodes: [{name: a, connector: static:(tcp://a:1,tcp://b:1)}]\n", 1, 19, "nodes[0].connector", address.ErrConnector,
			"(inside {...} or [...], quote a list of connectors"},
		{"connector a list", "nodes:\n  - name: a\n    connector: [tcp://h:1]\n", 3, 5, "nodes[0].connector", nil, "want a single value, not a list"},
		{"route without via", hub + "routes:\n  - node: far\n", 5, 5, "routes[0]", nil, "a route needs via"},
		{"route without node", hub + "routes:\n  - via: hub-1\n", 5, 5, "routes[0]", nil, "a route needs the node it leads to"},
		{"route through itself", hub + "routes:\n  - node: far\n    via: far\n", 6, 5, "routes[0].via", nil, `a route to "far" through itself`},
		{"route node invalid", hub + "routes:\n  - node: far@x\n    via: hub-1\n", 5, 5, "routes[0].node", message.ErrDestination, "has '@'"},
		{"window zero", "link:\n  window: 0\n", 2, 3, "link.window", nil, "must be at least 1, got 0"},
		{"window_bytes zero", "link:\n  window_bytes: 0\n", 2, 3, "link.window_bytes", nil, "must be more than 0, got 0"},
		{"max_frame zero", "link:\n  max_frame: 0\n", 2, 3, "link.max_frame", nil, "must be more than 0 and at most 4GiB-1"},
		{"max_frame too big", "link:\n  max_frame: 4GiB\n", 2, 3, "link.max_frame", nil, "got 4GiB"},
		{"idle_timeout zero", "link:\n  idle_timeout: 0s\n", 2, 3, "link.idle_timeout", nil, "must be more than 0, got 0s"},
		{"stall_after zero", "link:\n  stall_after: 0s\n", 2, 3, "link.stall_after", nil, "must be more than 0, got 0s"},
		{"handshake_timeout bare number", "link:\n  handshake_timeout: 10\n", 2, 3, "link.handshake_timeout", nil, `invalid duration "10"`},
		{"reconnect_min above max", "link:\n  reconnect_max: 1s\n  reconnect_min: 2s\n", 3, 3, "link.reconnect_min", nil, "2s is more than reconnect_max 1s"},
		{"link unknown key", "link:\n  windw: 5\n", 2, 3, "link.windw", nil, `did you mean "window"?`},
		{"max_handshakes zero", "link:\n  max_handshakes: 0\n", 2, 3, "link.max_handshakes", nil, "must be at least 1, got 0"},
		{"conn buffer under two frames", "link:\n  max_frame: 1MiB\n  max_conn_buffer_bytes: 1MiB\n", 3, 3, "link.max_conn_buffer_bytes", nil,
			"must be at least twice max_frame (2MiB)"},
		{"conn buffer under two default frames", "link:\n  max_conn_buffer_bytes: 16MiB\n", 2, 3, "link.max_conn_buffer_bytes", nil, "(32MiB)"},
		{"spool share over the quota", "files:\n  max_spool_bytes: 1GiB\n  max_spool_bytes_per_peer: 2GiB\n", 3, 3, "files.max_spool_bytes_per_peer", nil,
			"2GiB is more than max_spool_bytes 1GiB"},
		{"max_nodes zero", "discovery:\n  max_nodes: 0\n", 2, 3, "discovery.max_nodes", nil, "must be at least 1"},
		{"max_auto_queues zero", "max_auto_queues: 0\n", 1, 1, "max_auto_queues", nil, "must be at least 1"},
		{"node on a receive address", "addresses:\n  - name: a\n    node: hub-1\n", 3, 5, "addresses[0].node", nil,
			"applies only to send addresses, and this one is receive (add role: send"},
		{"node on a relay address", "addresses:\n  - {name: a, role: relay, node: hub-1}\n", 2, 28, "addresses[0].node", nil, "this one is relay"},
		{"send address node invalid", "addresses:\n  - {name: a, role: send, node: ''}\n", 2, 27, "addresses[0].node", message.ErrDestination, "name is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Parse("petrel.yaml", []byte(tt.doc))
			if err == nil {
				t.Fatalf("Parse succeeded: %+v", f)
			}
			wantError(t, err, tt.line, tt.col, tt.field, tt.target, tt.reason)
		})
	}
}

// TestParseCrossField covers the rules across sections, which
// petrel.Config.Validate owns and conf places on a line.
func TestParseCrossField(t *testing.T) {
	const head = "node:\n  name: plant-7\n" + // lines 1-2
		"nodes:\n  - name: hub-1\n    connector: tcp://h:1\n" // lines 3-5
	tests := []struct {
		name      string
		doc       string
		line, col int
		field     string
		reason    string
	}{
		{"route through an unknown node", head + "routes:\n  - node: plant-9\n    via: hub-1\n  - node: plant-10\n    via: hub-2\n",
			10, 5, "routes[1].via", `route to "plant-10" goes through "hub-2", which is not in nodes: add it to nodes with its connector`},
		{"route through a routed node", head + "routes:\n  - node: plant-9\n    via: hub-1\n  - {node: plant-10, via: plant-9}\n",
			9, 22, "routes[1].via", `goes through "plant-9", which is not in nodes`},
		{"send address with no route", head + "addresses:\n  - name: orders\n  - name: billing\n    role: send\n    node: plant-9\n",
			10, 5, "addresses[1].node", `send address "billing" goes to node "plant-9", which has no route: add "plant-9" to nodes or routes`},
		{"send address without node", head + "addresses:\n  - name: billing\n    role: send\n",
			7, 5, "addresses[0].node", `send address "billing" needs the node that hosts it`},
		{"send address hosted here", head + "addresses:\n  - {name: billing, role: send, node: plant-7}\n",
			7, 33, "addresses[0].node", `send address "billing" is hosted by this node: make it a receive address`},
		{"node listed twice", head + "  - name: hub-2\n    connector: tcp://h:2\n  - name: hub-1\n    connector: tcp://h:3\n",
			8, 5, "nodes[2].name", `node "hub-1" is listed twice`},
		{"node is this node", head + "  - name: plant-7\n    connector: tcp://h:2\n",
			6, 5, "nodes[1].name", `"plant-7" is this node itself`},
		{"node is this node by default name", "nodes:\n  - name: host-1\n    connector: tcp://h:2\n",
			2, 5, "nodes[0].name", `"host-1" is this node itself`},
		{"route to this node", head + "routes:\n  - node: plant-7\n    via: hub-1\n",
			7, 5, "routes[0].node", `"plant-7" is this node: it needs no route`},
		{"two routes to a node", head + "routes:\n  - {node: far, via: hub-1}\n  - {node: far, via: hub-1}\n",
			8, 6, "routes[1].node", `node "far" has two routes`},
	}
	withHostname(t, "host-1", nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Parse("petrel.yaml", []byte(tt.doc))
			if err == nil {
				t.Fatalf("Parse succeeded: %+v", f)
			}
			wantError(t, err, tt.line, tt.col, tt.field, petrel.ErrConfig, tt.reason)
			var ce *petrel.ConfigError
			if !errors.As(err, &ce) || ce.Field != tt.field {
				t.Errorf("error %v does not wrap the node's *ConfigError for %s", err, tt.field)
			}
		})
	}
}

func TestSecretFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	tests := []struct {
		name, content, want string
	}{
		{"newline", "s3cret\n", "s3cret"},
		{"crlf", "s3cret\r\n", "s3cret"},
		{"none", "s3cret", "s3cret"},
		{"inner spaces kept", " s3 cret \n", " s3 cret "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := write(tt.name, tt.content)
			f, err := Parse("petrel.yaml", []byte(fmt.Sprintf("secret_file: %q\n", path)))
			if err != nil {
				t.Fatal(err)
			}
			if f.Secret != Secret(tt.want) || f.SecretFile != path {
				t.Errorf("Secret = %q, SecretFile = %q; want %q, %q", string(f.Secret), f.SecretFile, tt.want, path)
			}
			if got := f.NodeConfig().Secret; got != tt.want {
				t.Errorf("NodeConfig().Secret = %q, want %q", got, tt.want)
			}
		})
	}
	for name, content := range map[string]string{"empty": "", "only newlines": "\n\n"} {
		t.Run(name, func(t *testing.T) {
			path := write(name, content)
			_, err := Parse("petrel.yaml", []byte("node: {name: a}\nsecret_file: "+path+"\n"))
			wantError(t, err, 2, 1, "secret_file", nil, "is empty: put the secret in it, or leave secret_file out")
		})
	}
	t.Run("too large", func(t *testing.T) {
		path := write("big", strings.Repeat("x", maxSecretFile+1))
		_, err := Parse("petrel.yaml", []byte("secret_file: "+path+"\n"))
		wantError(t, err, 1, 1, "secret_file", nil, "more than 65536 bytes")
	})
}

func TestSecretHidden(t *testing.T) {
	f, err := Parse("petrel.yaml", []byte("secret: s3cret\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		if out := fmt.Sprintf(verb, f); strings.Contains(out, "s3cret") {
			t.Errorf("%s of a File shows the secret: %s", verb, out)
		}
	}
	if Secret("").String() != "" {
		t.Error("an empty secret prints as something")
	}
}

// files.buffered_writes reaches the node's configuration; left out, it
// is false, and received files are written with O_DIRECT where possible.
func TestFilesBufferedWrites(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want bool
	}{{"files:\n  buffered_writes: true\n", true}, {"files:\n  window: 8\n", false}} {
		f, err := Parse("petrel.yaml", []byte(tc.yaml))
		if err != nil {
			t.Fatal(err)
		}
		if got := f.NodeConfig().Files.BufferedWrites; got != tc.want {
			t.Errorf("%q: BufferedWrites %v, want %v", tc.yaml, got, tc.want)
		}
	}
}
