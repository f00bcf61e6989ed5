package session

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
)

// TestCheckPeerRefusesAtHandshake checks that a server's CheckPeer sees the
// identity the client claims, and that its refusal reaches both sides as
// an authentication failure, with its reason, before any session opens.
func TestCheckPeerRefusesAtHandshake(t *testing.T) {
	scfg := testConfig("server")
	var seen Peer
	scfg.CheckPeer = func(p Peer) error {
		seen = p
		if p.Name != "alice" {
			return fmt.Errorf("%w: certificate is for \"alice\", client claims %q", ErrAuth, p.Name)
		}
		return nil
	}
	cn, sn := net.Pipe()
	c, s, cerr, serr := handshakePair(cn, sn, testConfig("mallory"), scfg)
	if c != nil || s != nil {
		t.Fatal("handshake succeeded for a peer CheckPeer refused")
	}
	if !errors.Is(serr, ErrAuth) || !errors.Is(cerr, ErrAuth) {
		t.Fatalf("errors = client %v, server %v; want ErrAuth on both", cerr, serr)
	}
	if !strings.Contains(cerr.Error(), `client claims "mallory"`) {
		t.Errorf("client error %q does not carry the server's reason", cerr)
	}
	if seen.Name != "mallory" || seen.ID != testConfig("mallory").ID {
		t.Errorf("CheckPeer saw %+v", seen)
	}

	pair(t, testConfig("alice"), scfg) // the right name passes
}
