package petrel_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/address"
	"github.com/petrelmq/petrel/internal/petreltest"
)

func TestTLSKeyOpenToOthersIsRefused(t *testing.T) {
	ca := newCA(t, "ca")
	cert, key := ca.Issue(t, "n")
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604, 0o620} {
		t.Run(mode.String(), func(t *testing.T) {
			if err := os.Chmod(key, mode); err != nil {
				t.Fatal(err)
			}
			cfg := petrel.Config{Name: "n", DataDir: t.TempDir(), Logger: quiet, TLS: petrel.TLSConfig{Cert: cert, Key: key}}
			n, err := petrel.Open(context.Background(), cfg)
			if err == nil {
				n.Close()
				t.Fatal("Open succeeded")
			}
			if !errors.Is(err, petrel.ErrSecretReadable) || !errors.Is(err, petrel.ErrConfig) || !strings.Contains(err.Error(), "chmod 600 "+key) {
				t.Fatalf("Open = %v; want ErrSecretReadable and the chmod that fixes it", err)
			}
		})
	}
	for _, mode := range []os.FileMode{0o600, 0o400} {
		if err := os.Chmod(key, mode); err != nil {
			t.Fatal(err)
		}
		if _, err := (petrel.TLSConfig{Cert: cert, Key: key}).ServerConfig(); err != nil {
			t.Fatalf("key of mode %v: %v", mode, err)
		}
	}
}

// TestNothingSecretLeaks runs two nodes linked over TLS with a secret, and
// an admin token, at debug level, and looks for the secret, the token and
// the private key in everything they say: logs, status, metrics, refusals
// and configuration errors.
func TestNothingSecretLeaks(t *testing.T) {
	const (
		secret = "link-secret-NEVER-SHOWN-41"
		token  = "admin-token-NEVER-SHOWN-42"
	)
	ca := newCA(t, "ca")
	var logs petreltest.SyncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	aTLS := ca.nodeTLS(t, "a", ca, petrel.ClientAuthNone)
	keyPEM, err := os.ReadFile(aTLS.Key)
	if err != nil {
		t.Fatal(err)
	}
	a := open(t, func(c *petrel.Config) {
		c.Name, c.Logger, c.Secret, c.TLS = "a", logger, secret, aTLS
		c.Listen = "127.0.0.1:0"
		c.Admin = petrel.AdminConfig{Listen: "127.0.0.1:0", Token: token}
	})
	b := open(t, func(c *petrel.Config) {
		c.Name, c.Logger, c.Secret, c.TLS = "b", logger, secret, petrel.TLSConfig{CA: ca.Path}
		c.Nodes = []petrel.NodeConfig{{Name: "a", Connector: tlsURL(a)}}
		c.Addresses = []petrel.AddressConfig{{Name: "in", Role: address.RoleSend, Node: "a"}}
	})
	sendOne(t, b, "in", "hello")
	c, err := a.Consumer("in")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	receive(t, c).Ack()

	var said []string
	for _, auth := range []string{"", "Bearer wrong-token-0123456789", "Bearer " + token} {
		for _, path := range []string{"/api/status", "/metrics", "/api/queues"} {
			said = append(said, adminGetAuth(t, a, path, auth))
		}
	}
	// Configuration errors: a reload and an Open that are refused, with
	// the same secrets in them.
	bad := petrel.Config{Name: "a", Secret: secret, Admin: petrel.AdminConfig{Listen: "0.0.0.0:0", Token: "short" + token[:5]},
		Routes: []petrel.RouteConfig{{Node: "x", Via: "nowhere"}}}
	if _, err := a.Reconfigure(context.Background(), bad); err == nil {
		t.Fatal("a bad reload was applied")
	} else {
		said = append(said, err.Error())
	}
	for _, cfg := range []petrel.Config{
		{Name: "c", DataDir: t.TempDir(), Logger: logger, Secret: secret, Admin: petrel.AdminConfig{Listen: "127.0.0.1:0", Token: token + " x"}},
		{Name: "c", DataDir: t.TempDir(), Logger: logger, Secret: secret, TLS: petrel.TLSConfig{Cert: aTLS.Cert, Key: aTLS.Key, ClientAuth: "always"}},
	} {
		if n, err := petrel.Open(context.Background(), cfg); err == nil {
			n.Close()
			t.Fatal("a bad Open succeeded")
		} else {
			said = append(said, err.Error())
		}
	}
	said = append(said, logs.String())
	keyBody := strings.Join(strings.Split(string(keyPEM), "\n")[1:3], "")
	for _, s := range said {
		for _, leak := range []string{secret, token, keyBody} {
			if strings.Contains(s, leak) {
				t.Errorf("%q appears in:\n%s", leak, s)
			}
		}
	}
	if !strings.Contains(logs.String(), "admin endpoint listening") {
		t.Errorf("the logs were not captured:\n%s", logs.String())
	}
}

// adminGetAuth GETs path from n's admin listener with the Authorization
// header auth (none if empty) and returns the body.
func adminGetAuth(t *testing.T, n *petrel.Node, path, auth string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+n.AdminAddr()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := adminClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Status + "\n" + resp.Header.Get("WWW-Authenticate") + "\n" + string(body)
}
