package filetransfer

import (
	"errors"
	"path/filepath"
	"testing"
)

func TestWithin(t *testing.T) {
	root := filepath.Join(t.TempDir(), "spool", "held")
	tests := []struct {
		path string
		ok   bool
	}{
		{root + "/0a1b-7", true},
		{root + "/0a1b-7/report.csv", true},
		{root + "/./0a1b-7/", true},
		{root + "/..hidden", true}, // a name that starts with dots is still inside
		{root, false},
		{root + "/", false},
		{root + "/..", false},
		{root + "/../../../victim/x", false},
		{root + "/0a1b-7/../../x", false},
		{"/etc/passwd", false},
		{"relative/x", false},
		{filepath.Dir(root) + "/heldout/x", false}, // a sibling sharing the prefix
	}
	for _, tt := range tests {
		got, err := Within(root, tt.path)
		if (err == nil) != tt.ok || err != nil && !errors.Is(err, ErrOutsideRoot) {
			t.Errorf("Within(root, %q) = %q, %v; want inside %v", tt.path, got, err, tt.ok)
		}
		if err == nil && got != filepath.Clean(tt.path) {
			t.Errorf("Within(root, %q) = %q, want the cleaned path", tt.path, got)
		}
	}
}
