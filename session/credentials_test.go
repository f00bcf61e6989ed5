package session

import (
	"errors"
	"net"
	"strings"
	"testing"
)

// credentials is a server's table of identities for the tests.
func credentials(m map[string]Credential) func(string) (Credential, bool) {
	return func(name string) (Credential, bool) {
		c, ok := m[name]
		return c, ok
	}
}

func TestHandshakeCredentials(t *testing.T) {
	table := credentials(map[string]Credential{
		"plant-7":  {Secret: []byte("plant-7 secret"), Kind: PeerNode},
		"hub-2":    {Secret: []byte("hub-2 secret"), Kind: PeerNode, Relay: true},
		"app-1":    {Secret: []byte("app-1 secret"), Kind: PeerClient},
		"by-cert":  {Kind: PeerNode}, // no secret: needs a certificate
		"defaults": {Secret: []byte("d")},
	})
	tests := []struct {
		name, client string
		secret       []byte // the client's
		certified    string // the server's Config.Certified
		want         Peer   // Kind and Relay the server sees
		serverErr    string // "" if it succeeds
	}{
		{name: "node with its secret", client: "plant-7", secret: []byte("plant-7 secret"), want: Peer{Kind: PeerNode}},
		{name: "relay", client: "hub-2", secret: []byte("hub-2 secret"), want: Peer{Kind: PeerNode, Relay: true}},
		{name: "client identity", client: "app-1", secret: []byte("app-1 secret"), want: Peer{Kind: PeerClient}},
		{name: "kind left out is a node", client: "defaults", secret: []byte("d"), want: Peer{Kind: PeerNode}},
		{name: "another identity's secret", client: "plant-7", secret: []byte("hub-2 secret"), serverErr: `client "plant-7" sent a wrong MAC`},
		{name: "the shared secret", client: "plant-7", secret: []byte("shared"), serverErr: "wrong MAC"},
		{name: "no secret", client: "plant-7", serverErr: `client "plant-7" sent no MAC, but this side requires the secret of identity "plant-7" (its peers entry)`},
		{name: "unknown name", client: "plant-8", secret: []byte("plant-7 secret"), serverErr: `no credentials for identity "plant-8" on this node`},
		{name: "invalid name", client: "../x", secret: []byte("x"), serverErr: "not a valid name"},
		{name: "name with a space", client: "plant 7", secret: []byte("x"), serverErr: "not a valid name"},
		{name: "no secret and no certificate", client: "by-cert", serverErr: `identity "by-cert" has no secret on this node and presented no verified certificate`},
		{name: "certificate", client: "by-cert", certified: "by-cert", want: Peer{Kind: PeerNode}},
		{name: "certificate for another name", client: "by-cert", certified: "plant-7", serverErr: "no verified certificate for that name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ccfg, scfg := testConfig(tc.client), testConfig("hub-1")
			ccfg.Secret = tc.secret
			scfg.Secret = []byte("shared") // ignored: Credentials decide
			scfg.Credentials = table
			scfg.Certified = tc.certified
			cn, sn := net.Pipe()
			c, s, cerr, serr := handshakePair(cn, sn, ccfg, scfg)
			if tc.serverErr != "" {
				if s != nil || c != nil {
					t.Fatal("handshake succeeded")
				}
				if !errors.Is(serr, ErrAuth) || !strings.Contains(serr.Error(), tc.serverErr) {
					t.Errorf("server error %v, want ErrAuth with %q", serr, tc.serverErr)
				}
				if !errors.Is(cerr, ErrAuth) || !strings.Contains(cerr.Error(), tc.serverErr) {
					t.Errorf("client error %v, want the server's reason %q", cerr, tc.serverErr)
				}
				return
			}
			if cerr != nil || serr != nil {
				t.Fatalf("handshake: client %v, server %v", cerr, serr)
			}
			defer func() { c.Close(); s.Close() }()
			if p := s.Peer(); p.Name != tc.client || p.Kind != tc.want.Kind || p.Relay != tc.want.Relay {
				t.Errorf("server sees %+v, want kind %v relay %v", p, tc.want.Kind, tc.want.Relay)
			}
			if p := c.Peer(); p.Kind != PeerNode {
				t.Errorf("client sees its server as %v, want node", p.Kind)
			}
		})
	}
}

// TestClientPicksSecretByServer: a dialer with Credentials uses the secret
// it holds for the server Hello names, and checks the server's proof with
// it; for other servers it falls back to Secret.
func TestClientPicksSecretByServer(t *testing.T) {
	scfg := testConfig("hub-1")
	scfg.Credentials = credentials(map[string]Credential{"plant-7": {Secret: []byte("pair secret"), Kind: PeerNode}})
	ccfg := testConfig("plant-7")
	ccfg.Secret = []byte("shared")
	ccfg.Credentials = credentials(map[string]Credential{"hub-1": {Secret: []byte("pair secret")}})
	c, s := pair(t, ccfg, scfg)
	if c.Peer().Name != "hub-1" || s.Peer().Name != "plant-7" {
		t.Fatalf("peers %+v, %+v", c.Peer(), s.Peer())
	}

	// A server that does not hold the pair's secret takes anyone and
	// cannot prove it: the client refuses it.
	impostor := testConfig("hub-1")
	cn, sn := net.Pipe()
	c2, s2, cerr, _ := handshakePair(cn, sn, ccfg, impostor)
	if c2 != nil || !errors.Is(cerr, ErrAuth) || !strings.Contains(cerr.Error(), `server "hub-1" sent no MAC`) {
		t.Fatalf("client %v: want ErrAuth for the server", cerr)
	}
	if s2 != nil {
		s2.Close()
	}
}

// TestSharedSecretPeerIsMember: without Credentials, a peer's name is a
// claim; it is a member, trusted to relay.
func TestSharedSecretPeerIsMember(t *testing.T) {
	ccfg, scfg := testConfig("plant-7"), testConfig("hub-1")
	ccfg.Secret, scfg.Secret = []byte("s3cret"), []byte("s3cret")
	_, s := pair(t, ccfg, scfg)
	if p := s.Peer(); p.Kind != PeerMember || !p.Relay {
		t.Errorf("server sees %+v, want a member that may relay", p)
	}
}
