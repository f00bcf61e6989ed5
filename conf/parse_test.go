package conf

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/petrelmq/petrel/address"
	"github.com/petrelmq/petrel/message"
)

// TestParseErrors checks, for each kind of problem, the line, column and
// field that the operator is sent to, the sentinel a caller can match, and a
// piece of the reason.
func TestParseErrors(t *testing.T) {
	tests := []struct {
		name      string
		doc       string
		line, col int
		field     string
		target    error // besides ErrInvalid, which every case must match
		reason    string
	}{
		{"unknown top-level key", "nod:\n  name: a\n", 1, 1, "nod", nil, `unknown field "nod" (did you mean "node"?)`},
		{"unknown nested key", "node:\n  name: a\nlimits:\n  mx_body: 1\n", 4, 3, "limits.mx_body", nil, `unknown field "mx_body" (did you mean "max_body"?)`},
		{"unknown key far from any", "store:\n  colour: red\n", 2, 3, "store.colour", nil, "known fields: sync, max_bytes"},
		{"key set twice", "node:\n  name: a\n  name: b\n", 3, 3, "node.name", nil, "set twice (first at line 2)"},
		{"key not a word", "? [a]\n: 1\n", 1, 3, "", nil, "a key must be a plain word"},
		{"top level is a list", "- a\n", 1, 1, "", nil, "want a mapping of keys (node, listen, secret, secret_file, nodes, routes, link, discovery, store,"},
		{"section is a scalar", "store: fast\n", 1, 1, "store", nil, `want a mapping of keys (sync,`},
		{"addresses not a list", "addresses:\n  name: a\n", 1, 1, "addresses", nil, "want a list"},
		{"int is a word", "store:\n  max_messages: lots\n", 2, 3, "store.max_messages", nil, `want a whole number, not "lots"`},
		{"int is a mapping", "store:\n  max_messages: {a: 1}\n", 2, 3, "store.max_messages", nil, "want a whole number, not a mapping"},
		{"int overflows", "limits:\n  max_properties: 99999999999999999999\n", 2, 3, "limits.max_properties", nil, "want a whole number"},
		{"int has a fraction", "addresses:\n  - name: a\n    max_deliveries: 1.9\n", 3, 5, "addresses[0].max_deliveries", nil, `want a whole number, not "1.9"`},
		{"int has a fraction nested", "link: {window: 1.5}\n", 1, 8, "link.window", nil, `want a whole number, not "1.5"`},
		{"int is a fraction below 1", "files:\n  window: 0.5\n", 2, 3, "files.window", nil, `want a whole number, not "0.5"`},
		{"int with an exponent and a fraction", "store:\n  max_messages: 1.5e0\n", 2, 3, "store.max_messages", nil, `want a whole number, not "1.5e0"`},
		{"outbox listed twice, once with a slash", "outboxes:\n  - {dir: /srv/ob, to: x}\n  - {dir: /srv/ob/, to: y}\n", 3, 6, "outboxes[1].dir", nil, `folder "/srv/ob/" is watched by outboxes[0] ("/srv/ob")`},
		{"outbox listed twice, unclean", "outboxes:\n  - {dir: /srv/ob, to: x}\n  - {dir: /srv/x/../ob/., to: y}\n", 3, 6, "outboxes[1].dir", nil, `is watched by outboxes[0]`},
		{"outbox listed twice, relative and absolute", "outboxes:\n  - {dir: ob, to: x}\n  - {dir: " + absTest("ob") + ", to: y}\n", 3, 6, "outboxes[1].dir", nil, `is watched by outboxes[0]`},
		{"outbox in another's sent folder", "outboxes:\n  - {dir: /srv/ob, to: x}\n  - {dir: /srv/ob/sent, to: y}\n", 3, 6, "outboxes[1].dir", nil, `folder "/srv/ob/sent" is in the sent/ folder of outboxes[0] ("/srv/ob")`},
		{"outbox under another's failed folder", "outboxes:\n  - {dir: /srv/ob/failed/x, to: x}\n  - {dir: /srv/ob, to: y}\n", 3, 6, "outboxes[1].dir", nil, `folder "/srv/ob" has its failed/ folder watched by outboxes[0] ("/srv/ob/failed/x")`},
		{"int is quoted", "store:\n  max_messages: '5'\n", 2, 3, "store.max_messages", nil, `want a whole number, not "5" (a quoted value is a string: drop the quotes)`},
		{"bool is quoted", "auto_create: \"true\"\n", 1, 1, "auto_create", nil, "drop the quotes"},
		{"bool is a word", "auto_create: maybe\n", 1, 1, "auto_create", nil, `want true or false, not "maybe"`},
		{"string is a list", "node:\n  data_dir: [a]\n", 2, 3, "node.data_dir", nil, "want a string, not a list"},
		{"size unit unknown", "store:\n  max_bytes: 10 parsecs\n", 2, 3, "store.max_bytes", nil, `invalid size "10 parsecs"`},
		{"admin listen not host:port", "admin:\n  listen: localhost\n", 2, 3, "admin.listen", nil, "is not host:port"},
		{"size negative", "limits:\n  max_body: -1\n", 2, 3, "limits.max_body", nil, `size "-1" is negative`},
		{"size is a list", "limits:\n  max_body: [1]\n", 2, 3, "limits.max_body", nil, "want a single value, not a list"},
		{"duration without unit", "store:\n  sweep_interval: 30\n", 2, 3, "store.sweep_interval", nil, `invalid duration "30"`},
		{"duration zero", "store:\n  sweep_interval: 0s\n", 2, 3, "store.sweep_interval", nil, "must be more than 0, got 0s"},
		{"duration negative", "addresses:\n  - name: a\n    lease_timeout: -1s\n", 3, 5, "addresses[0].lease_timeout", nil, "must be more than 0, got -1s"},
		{"sync unknown", "store:\n  sync: always\n", 2, 3, "store.sync", nil, `unknown sync mode "always" (want full or normal)`},
		{"on_full unknown", "store:\n  on_full: drop\n", 2, 3, "store.on_full", nil, `unknown on_full policy "drop" (want error or block)`},
		{"count negative", "store:\n  prefetch_messages: -1\n", 2, 3, "store.prefetch_messages", nil, "must not be negative, got -1"},
		{"limit negative", "limits:\n  max_header_string: -5\n", 2, 3, "limits.max_header_string", nil, "must not be negative, got -5"},
		{"log level unknown", "log:\n  level: verbose\n", 2, 3, "log.level", nil, `unknown log level "verbose" (want debug, info, warn or error)`},
		{"log level upper case", "log:\n  level: INFO\n", 2, 3, "log.level", nil, `unknown log level "INFO"`},
		{"log format unknown", "log:\n  format: xml\n", 2, 3, "log.format", nil, `unknown log format "xml" (want text or json)`},
		{"node name invalid", "node:\n  name: my host\n", 2, 3, "node.name", message.ErrDestination, `name "my host" has ' ' at byte 2`},
		{"node name empty", "node:\n  name: ''\n", 2, 3, "node.name", message.ErrDestination, "name is empty"},
		{"data_dir empty", "node:\n  data_dir: \"\"\n", 2, 3, "node.data_dir", nil, "must not be empty"},
		{"role unknown", "addresses:\n  - name: a\n  - name: b\n    role: foo\n", 4, 5, "addresses[1].role", address.ErrRole, `unknown address role "foo" (want receive, send or relay)`},
		{"address without name", "addresses:\n  - role: send\n", 2, 5, "addresses[0]", nil, "an address needs a name"},
		{"address name invalid", "addresses:\n  - name: .hidden\n", 2, 5, "addresses[0].name", message.ErrDestination, "starts with '.'"},
		{"address declared twice", "addresses:\n  - name: a\n  - name: b\n  - name: a\n", 4, 5, "addresses[2].name", nil, `address "a" is declared twice (first as addresses[0])`},
		{"max_deliveries zero", "addresses:\n  - name: a\n    max_deliveries: 0\n", 3, 5, "addresses[0].max_deliveries", nil, "must be at least 1, got 0"},
		{"dead_letter is itself", "addresses:\n  - name: a\n    dead_letter: a\n", 3, 5, "addresses[0].dead_letter", nil, "is the address itself"},
		{"expiry_address invalid", "addresses:\n  - name: a\n    expiry_address: a@b\n", 3, 5, "addresses[0].expiry_address", message.ErrDestination, "has '@'"},
		{"consumer key on send address", "addresses:\n  - name: a\n    role: send\n    lease_timeout: 5s\n", 4, 5, "addresses[0].lease_timeout", nil, "applies only to receive addresses, and this one is send"},
		{"redelivery above its cap", "addresses:\n  - name: a\n    redelivery_delay: 2m\n    max_redelivery_delay: 1m\n", 3, 5, "addresses[0].redelivery_delay", nil, "2m0s is more than max_redelivery_delay 1m0s"},
		{"first in document order", "addresses:\n  - name: a\n    max_deliveries: 0\nnode:\n  name: ''\n", 3, 5, "addresses[0].max_deliveries", nil, "must be at least 1"},
		{"unknown key in merged anchor", "x-d: &d {lease: 1s}\naddresses:\n  - <<: *d\n    name: a\n", 1, 10, "addresses[0].lease", nil, `unknown field "lease"`},
		{"merge of a scalar", "addresses:\n  - <<: 5\n    name: a\n", 2, 9, "addresses[0]", nil, "want a mapping of keys"},
		{"yaml syntax", "node: [\n", 1, 0, "", nil, "YAML syntax: did not find expected node content"},
		{"yaml tab indent", "node:\n\tname: a\n", 2, 0, "", nil, "YAML syntax: found character that cannot start any token"},
		{"two documents", "node:\n  name: a\n---\nlog: {}\n", 3, 1, "", nil, "a second YAML document"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Parse("petrel.yaml", []byte(tt.doc))
			if err == nil {
				t.Fatalf("Parse succeeded: %+v", f)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v (%T) is not an *Error", err, err)
			}
			if e.File != "petrel.yaml" || e.Line != tt.line || e.Column != tt.col || e.Field != tt.field {
				t.Errorf("at %s:%d:%d %q, want petrel.yaml:%d:%d %q (%v)", e.File, e.Line, e.Column, e.Field, tt.line, tt.col, tt.field, err)
			}
			if !strings.Contains(e.Reason, tt.reason) {
				t.Errorf("reason %q does not contain %q", e.Reason, tt.reason)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("errors.Is(%v, ErrInvalid) is false", err)
			}
			if tt.target != nil && !errors.Is(err, tt.target) {
				t.Errorf("errors.Is(%v, %v) is false", err, tt.target)
			}
		})
	}
}

// TestAliasBomb checks that merges nested to expand exponentially are
// refused quickly instead of walked.
func TestAliasBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("x-0: &a0 {max_deliveries: 1}\n")
	for i := 1; i <= 12; i++ {
		refs := strings.Repeat(fmt.Sprintf("*a%d, ", i-1), 9) + fmt.Sprintf("*a%d", i-1)
		fmt.Fprintf(&b, "x-%d: &a%d {<<: [%s]}\n", i, i, refs)
	}
	b.WriteString("addresses:\n  - <<: *a12\n    name: x\n")
	_, err := Parse("bomb.yaml", []byte(b.String()))
	if err == nil || !strings.Contains(err.Error(), "too many aliases or merges") {
		t.Fatalf("Parse = %v, want a too-many-aliases error", err)
	}
}

func TestErrorString(t *testing.T) {
	tests := []struct {
		e    Error
		want string
	}{
		{Error{File: "p.yaml", Line: 12, Column: 5, Field: "addresses[1].role", Reason: "bad"}, "p.yaml:12:5: addresses[1].role: bad"},
		{Error{File: "p.yaml", Line: 3, Reason: "YAML syntax: x"}, "p.yaml:3: YAML syntax: x"},
		{Error{File: "p.yaml", Reason: "too big"}, "p.yaml: too big"},
		{Error{Field: "node.name", Reason: "bad"}, "node.name: bad"},
	}
	for _, tt := range tests {
		if got := tt.e.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}
