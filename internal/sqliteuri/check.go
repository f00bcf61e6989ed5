package sqliteuri

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// CheckFiles refuses, before SQLite opens the database at path, what
// SQLite would take without a word:
//   - a database file the process cannot write (immutable, on a read-only
//     mount, or owned by another user after a restore): SQLite opens it
//     read-only, and the node would say ready, then fail every write;
//   - an empty database file beside a write-ahead log that holds data:
//     the database was truncated or replaced, and SQLite would start an
//     empty database and reset the log, throwing away what it held.
func CheckFiles(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil // a new database
	case err != nil:
		return fmt.Errorf("the database cannot be opened for writing: %w", err)
	}
	st, err := f.Stat()
	f.Close()
	if err != nil {
		return err
	}
	if st.Size() > 0 {
		return nil
	}
	// A log's header is 32 bytes; frames follow it.
	if wal, err := os.Stat(path + "-wal"); err == nil && wal.Size() > 32 {
		return fmt.Errorf("the database file is empty, but its write-ahead log %s holds %d bytes: the database was truncated or replaced, "+
			"and opening it would throw the log away; restore the data directory from a copy, or move it away to start afresh", path+"-wal", wal.Size())
	}
	return nil
}

// WhyNotOpened adds to err, SQLite's failure to open the database at
// path, the cause SQLite does not name: a directory that takes no new
// files, where SQLite makes its -wal and -shm files ("unable to open
// database file: no such file or directory" on a read-only mount).
func WhyNotOpened(path string, err error) error {
	dir := filepath.Dir(path)
	f, cerr := os.CreateTemp(dir, ".petrel-write-check-*")
	if cerr != nil {
		return fmt.Errorf("%w (the directory %s takes no new files, and SQLite makes its -wal and -shm files there: %v)", err, dir, cerr)
	}
	f.Close()
	os.Remove(f.Name())
	return err
}

// CheckWritable runs insert, a statement that writes a row, and rolls it
// back: it fails on a database SQLite opened read-only (see CheckFiles),
// whatever the reason. Taking the write lock alone (BEGIN IMMEDIATE) does
// not: SQLite grants it.
func CheckWritable(ctx context.Context, db *sql.DB, insert string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, insert); err != nil {
		return fmt.Errorf("the database cannot be written: %w", err)
	}
	return nil
}
