package sqliteuri

import (
	"database/sql"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	_ "github.com/mattn/go-sqlite3"
)

// TestURIOpensThePathItWasGiven: a database opened through URI at a path
// holding every character a URI gives a meaning to is the file at that
// path, and no other.
func TestURIOpensThePathItWasGiven(t *testing.T) {
	root := t.TempDir()
	for _, name := range []string{"site#2", "a?b=c", "100%25", "50%", "x#y?z%41", "with space", "plain"} {
		dir := filepath.Join(root, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "petrel.db")
		db, err := sql.Open("sqlite3", URI(path, url.Values{"_journal_mode": {"WAL"}}))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(`CREATE TABLE t (x)`); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var mode string
		if err := db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
			t.Fatalf("%s: journal mode %q, %v: the parameters were lost", name, mode, err)
		}
		db.Close()
		if _, err := os.Stat(path); err != nil {
			t.Fatalf("%s: the database is not at its path: %v", name, err)
		}
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 7 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("the root holds %q: a database went beside its directory", names)
	}
}
