// Package durable makes directories whose existence survives a power
// loss.
package durable

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// MkdirAll is os.MkdirAll, then an fsync of the parent of every directory
// it made, from the top down: a directory's name is an entry of its
// parent, which only the parent's fsync makes durable. Without it a power
// loss right after a node's first start could take its whole data
// directory, and every message acked into it, with it.
func MkdirAll(dir string, perm fs.FileMode) error {
	dir = filepath.Clean(dir)
	var made []string // deepest first
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil || !errors.Is(err, fs.ErrNotExist) {
			break
		}
		made = append(made, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if err := os.MkdirAll(dir, perm); err != nil {
		return err
	}
	for i := len(made) - 1; i >= 0; i-- {
		if err := SyncDir(filepath.Dir(made[i])); err != nil {
			return err
		}
	}
	return nil
}

// SyncDir fsyncs a directory, so that the names created, renamed or
// removed in it survive a power loss.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
