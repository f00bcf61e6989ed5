package conf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// absTest is name made absolute as the node makes an outbox's folder.
func absTest(name string) string {
	abs, err := filepath.Abs(name)
	if err != nil {
		panic(err)
	}
	return abs
}

// TestOutboxFolderThroughASymlinkIsWatchedOnce checks that a folder named
// once by its path and once through a symbolic link to it is refused, as
// the same folder spelled twice is: each outbox would send every file.
func TestOutboxFolderThroughASymlinkIsWatchedOnce(t *testing.T) {
	dir := t.TempDir()
	ob := filepath.Join(dir, "ob")
	if err := os.Mkdir(ob, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(ob, link); err != nil {
		t.Fatal(err)
	}
	doc := "outboxes:\n  - {dir: " + ob + ", to: x}\n  - {dir: " + link + ", to: y}\n"
	_, err := Parse("petrel.yaml", []byte(doc))
	if err == nil || !strings.Contains(err.Error(), "outboxes[1].dir") || !strings.Contains(err.Error(), "is watched by outboxes[0]") {
		t.Fatalf("Parse = %v, want outboxes[1].dir refused as watched by outboxes[0]", err)
	}
}

// TestOutboxFoldersThatDoNotOverlapAreAccepted checks what the overlap
// check lets through: a folder inside another outbox's (an outbox leaves
// its subfolders alone), a sibling whose name starts like the other's, and
// a folder named like sent/ that is not under the other outbox.
func TestOutboxFoldersThatDoNotOverlapAreAccepted(t *testing.T) {
	for _, pair := range [][2]string{
		{"/srv/ob", "/srv/ob/billing"},
		{"/srv/ob/billing", "/srv/ob"},
		{"/srv/ob", "/srv/ob2"},
		{"/srv/ob", "/srv/sent"},
		{"/srv/ob", "/srv/ob/sentx"},
	} {
		doc := "outboxes:\n  - {dir: " + pair[0] + ", to: x}\n  - {dir: " + pair[1] + ", to: y}\n"
		if _, err := Parse("petrel.yaml", []byte(doc)); err != nil {
			t.Errorf("%s and %s: %v", pair[0], pair[1], err)
		}
	}
}

// TestWholeNumbersWrittenAsFloatsAreAccepted checks that refusing a
// fraction for an integer key keeps the floats that are whole numbers.
func TestWholeNumbersWrittenAsFloatsAreAccepted(t *testing.T) {
	f, err := Parse("petrel.yaml", []byte("link: {window: 1e3}\naddresses:\n  - {name: a, max_deliveries: 2.0}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if f.Link.Window != 1000 || f.Addresses[0].MaxDeliveries != 2 {
		t.Fatalf("window %d, max_deliveries %d; want 1000 and 2", f.Link.Window, f.Addresses[0].MaxDeliveries)
	}
}
