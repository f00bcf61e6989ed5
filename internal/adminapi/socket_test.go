package adminapi

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDialSocketLongPathSaysWhy: dialling a socket too long for an
// address, where none listens, fails with an error that names the path,
// its length and the alias tried, not only the alias.
func TestDialSocketLongPathSaysWhy(t *testing.T) {
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 120))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, SocketName)
	_, err := DialSocket(context.Background(), path)
	if err == nil {
		t.Fatal("dialled a socket that does not exist")
	}
	for _, want := range []string{path, "bytes long", "/proc/self/fd/"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}
