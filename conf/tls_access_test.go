package conf

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	petrel "github.com/petrelmq/petrel"
)

func TestTLSAndAccessSections(t *testing.T) {
	f := mustParse(t, `
node: {name: n1}
listen: 127.0.0.1:0
tls:
  cert: /etc/petrel/n1.pem
  key: /etc/petrel/n1.key
  ca: /etc/petrel/ca.pem
  client_auth: require_and_verify
  server_name: hub.example.com
access:
  - identity: plant-9
    send: [orders, orders.*]
    consume: [replies]
  - identity: "*"
    relay: ["*"]
  - identity: app-1
    publish: [orders.#]
    subscribe: [orders.*.created, "alerts.#"]
`)
	cfg := f.NodeConfig()
	wantTLS := petrel.TLSConfig{Cert: "/etc/petrel/n1.pem", Key: "/etc/petrel/n1.key", CA: "/etc/petrel/ca.pem",
		ClientAuth: petrel.ClientAuthRequireAndVerify, ServerName: "hub.example.com"}
	if cfg.TLS != wantTLS {
		t.Errorf("TLS = %+v, want %+v", cfg.TLS, wantTLS)
	}
	wantAccess := []petrel.AccessRule{
		{Identity: "plant-9", Send: []string{"orders", "orders.*"}, Consume: []string{"replies"}},
		{Identity: "*", Relay: []string{"*"}},
		{Identity: "app-1", Publish: []string{"orders.#"}, Subscribe: []string{"orders.*.created", "alerts.#"}},
	}
	if !reflect.DeepEqual(cfg.Access, wantAccess) {
		t.Errorf("Access = %+v, want %+v", cfg.Access, wantAccess)
	}
	if d := Default().NodeConfig(); d.TLS != (petrel.TLSConfig{}) || d.Access != nil {
		t.Errorf("defaults: TLS %+v, Access %+v", d.TLS, d.Access)
	}
}

func TestTLSAndAccessErrors(t *testing.T) {
	tests := []struct {
		name, doc  string
		line, col  int
		field      string
		reason     string
		nodeConfig bool // a rule of petrel.Config.Validate
	}{
		{"bad client_auth", "tls:\n  cert: c.pem\n  key: k.pem\n  client_auth: always\n", 4, 3, "tls.client_auth",
			`unknown client_auth "always" (want none, request or require_and_verify)`, false},
		{"empty cert", "tls:\n  cert: ''\n", 2, 3, "tls.cert", "must not be empty", false},
		{"cert without key", "tls:\n  ca: ca.pem\n  cert: c.pem\n", 1, 1, "tls.key", "tls.cert is set but tls.key is not", true},
		{"verify without ca", "tls:\n  cert: c.pem\n  key: k.pem\n  client_auth: require_and_verify\n", 1, 1, "tls.ca",
			"client_auth require_and_verify verifies clients against tls.ca", true},
		{"unknown tls key", "tls:\n  certificate: c.pem\n", 2, 3, "tls.certificate", `unknown field "certificate" (known fields: cert, key, ca, client_auth, server_name)`, false},
		{"rule without identity", "access:\n  - send: [a]\n", 2, 5, "access[0]", "an access rule needs an identity", false},
		{"bad pattern", "access:\n  - identity: a\n    send: [a, 'x*y']\n", 3, 15, "access[0].send[1]", `pattern "x*y"`, true},
		{"rule grants nothing", "access:\n  - identity: a\n", 2, 5, "access[0]", "the rule grants nothing", true},
		{"bad publish pattern", "access:\n  - identity: a\n    publish: [orders.#, 'x.#y']\n", 3, 24, "access[0].publish[1]", `topic pattern "x.#y"`, true},
		{"empty subscribe word", "access:\n  - identity: a\n    subscribe: ['a..b']\n", 3, 17, "access[0].subscribe[0]", "empty word", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("petrel.yaml", []byte(tt.doc))
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Parse = %v, want an *Error", err)
			}
			if e.Line != tt.line || e.Field != tt.field || !strings.Contains(e.Reason, tt.reason) {
				t.Errorf("Parse = %v (line %d col %d field %q), want line %d field %q reason %q", err, e.Line, e.Column, e.Field, tt.line, tt.field, tt.reason)
			}
			if errors.Is(err, petrel.ErrConfig) != tt.nodeConfig {
				t.Errorf("errors.Is(ErrConfig) = %v, want %v", !tt.nodeConfig, tt.nodeConfig)
			}
		})
	}
}

func TestCompareTLSAndAccess(t *testing.T) {
	old := mustParse(t, diffBase)
	new := mustParse(t, diffBase+"tls: {ca: /ca.pem}\naccess: [{identity: a, send: [x]}]\n")
	want := Diff{Restart: []string{"tls.ca"}, Changed: []string{SectionAccess}}
	if got := Compare(old, new); !reflect.DeepEqual(got, want) {
		t.Errorf("Compare = %#v, want %#v", got, want)
	}
}
