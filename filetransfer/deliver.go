package filetransfer

import (
	"errors"
	"fmt"
	"github.com/petrelmq/petrel/internal/durable"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unicode/utf8"
)

// deliver gives the verified spool file partPath its final name in
// destDir: name, or the first free variant of it. It returns the final
// path once that name is durable (destDir fsynced). partPath keeps its own
// name; the caller removes it with the state.
//
// The order of the steps is what makes a crash harmless:
//
//	spool:    X.part (synced, state says offset == size)
//	1. link   destDir/report.csv -> same inode as X.part     (the delivery)
//	2. fsync  destDir
//	3. (caller) remove X.state, X.part; fsync the spool
//
// A crash before 1 leaves the transfer to complete again. A crash between
// 1 and 3 leaves X.part linked to the delivered file; the next Complete
// finds that link (findPlaced) and returns it instead of delivering twice.
//
// When destDir is on another filesystem, a link is impossible (EXDEV):
// the file is copied to destDir/.petrel-X.tmp, fsynced, and that copy is
// linked as above. The temp name starts with a dot, so it is not taken for
// a received file, and it is recognised the same way after a crash.
func deliver(partPath, destDir, name, id string) (string, error) {
	if err := durable.MkdirAll(destDir, 0o750); err != nil {
		return "", err
	}
	if p := findPlaced(partPath, destDir, name); p != "" {
		return p, durable.SyncDir(destDir)
	}
	final, err := placeUnique(partPath, destDir, name)
	if errors.Is(err, syscall.EXDEV) {
		return deliverAcross(partPath, destDir, name, id)
	}
	if err != nil {
		return "", err
	}
	return final, durable.SyncDir(destDir)
}

// deliverAcross delivers partPath into destDir on another filesystem,
// through a copy under a temp name in destDir.
func deliverAcross(partPath, destDir, name, id string) (string, error) {
	tmp := tempPath(destDir, id)
	if p := findPlaced(tmp, destDir, name); p != "" {
		if err := removeIfExists(tmp); err != nil {
			return "", err
		}
		return p, durable.SyncDir(destDir)
	}
	// A temp file not linked anywhere is a copy a crash interrupted.
	if err := removeIfExists(tmp); err != nil {
		return "", err
	}
	if err := copyFile(partPath, tmp); err != nil {
		return "", err
	}
	final, err := placeUnique(tmp, destDir, name)
	if err != nil {
		os.Remove(tmp)
		return "", err
	}
	if err := removeIfExists(tmp); err != nil {
		return "", err
	}
	return final, durable.SyncDir(destDir)
}

// tempPath is the name under which transfer id is copied into destDir
// before it gets its final name.
func tempPath(destDir, id string) string {
	return filepath.Join(destDir, ".petrel-"+id+".tmp")
}

func removeIfExists(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// maxCollisions bounds the search for a free name ("report (1).csv", ...).
// Past it the folder is more likely broken than busy.
const maxCollisions = 10000

// copyBufSize is the buffer of every streaming read or copy here: large
// enough that a read is one trip to the disk, small enough that memory
// stays constant whatever the file size.
const copyBufSize = 1 << 20

// writeFileAtomic replaces path with data so that a crash at any point
// leaves either the old or the new content, never a mix (the pattern of
// nsq's diskqueue metadata): write a temp file beside it, fsync it, rename
// it over path, fsync the directory.
func writeFileAtomic(path string, data []byte) error {
	if err := replaceFile(path, data); err != nil {
		return err
	}
	return durable.SyncDir(filepath.Dir(path))
}

// replaceFile writes data to a temp file, fsyncs it and renames it over
// path: path then holds the old or the new content, whole, never a mix.
func replaceFile(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// candidateName returns the i-th name tried for name in a folder: name
// itself, then "report (1).csv", "report (2).csv", and so on, the way
// browsers and file managers do. The number goes before the last
// extension ("archive.tar (1).gz"); a dot-file has no extension
// (".profile (1)"). The base is shortened, on a UTF-8 boundary, when the
// result would pass MaxNameLen.
func candidateName(name string, i int) string {
	return candidateNameWithin(name, i, MaxNameLen)
}

// candidateNameWithin is candidateName for names of at most maxLen bytes:
// name itself is shortened the same way when it is longer.
func candidateNameWithin(name string, i, maxLen int) string {
	if i == 0 && len(name) <= maxLen {
		return name
	}
	ext := filepath.Ext(name)
	if ext == name || len(ext) > maxLen/2 {
		ext = ""
	}
	base := strings.TrimSuffix(name, ext)
	suffix := ""
	if i > 0 {
		suffix = fmt.Sprintf(" (%d)", i)
	}
	if max := maxLen - len(suffix) - len(ext); len(base) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(base[cut]) {
			cut--
		}
		base = base[:cut]
	}
	return base + suffix + ext
}

// placeUnique gives src a new name in dir, the first free one among
// candidateName(name, 0, 1, ...), and never replaces an existing file. src
// must be on dir's filesystem (else the error wraps syscall.EXDEV). src
// keeps its own name: the caller removes it once the new one is durable.
//
// A hard link is what makes it safe: link(2) fails with EEXIST instead of
// replacing, atomically, so two placements racing for "report.csv" end
// under two names, and the file appears under its name whole, in one step.
// On a filesystem without hard links (FAT, some network shares) it falls
// back to rename after checking the name is free; two placements racing
// for one name can then overwrite each other there.
func placeUnique(src, dir, name string) (string, error) {
	return placeUniqueWhere(src, dir, name, MaxNameLen, nil)
}

// placeUniqueWhere is placeUnique for names of at most maxLen bytes (see
// candidateNameWithin), skipping the names for which free, when not nil,
// is false: a name whose companion name (its reason file) is taken.
func placeUniqueWhere(src, dir, name string, maxLen int, free func(path string) bool) (string, error) {
	for i := 0; i < maxCollisions; i++ {
		cand := filepath.Join(dir, candidateNameWithin(name, i, maxLen))
		if free != nil && !free(cand) {
			continue
		}
		err := os.Link(src, cand)
		switch {
		case err == nil:
			return cand, nil
		case errors.Is(err, fs.ErrExist):
			continue
		case errors.Is(err, syscall.EXDEV), errors.Is(err, fs.ErrNotExist):
			return "", err
		}
		if _, serr := os.Lstat(cand); !errors.Is(serr, fs.ErrNotExist) {
			return "", err // the link failed for a reason a rename would share
		}
		if rerr := os.Rename(src, cand); rerr != nil {
			return "", fmt.Errorf("%w (and rename: %v)", err, rerr)
		}
		return cand, nil
	}
	return "", fmt.Errorf("no free name for %q in %s after %d tries: %w", name, dir, maxCollisions, fs.ErrExist)
}

// findPlaced returns the name under which src was already placed in dir,
// or "" if it was not. It looks at the names placeUnique would have tried,
// in order, up to the first free one, for one that is the same file as src
// (a hard link to it). That is how a Complete interrupted by a crash
// between the link and the cleanup finds its file instead of delivering it
// twice.
func findPlaced(src, dir, name string) string {
	sfi, err := os.Stat(src)
	if err != nil {
		return ""
	}
	for i := 0; i < maxCollisions; i++ {
		cand := filepath.Join(dir, candidateName(name, i))
		fi, err := os.Lstat(cand)
		if err != nil {
			return ""
		}
		if os.SameFile(sfi, fi) {
			return cand
		}
	}
	return ""
}

// copyFile copies src into a new file dst (which must not exist) and
// fsyncs it. On error dst is removed.
func copyFile(src, dst string) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(dst)
		}
	}()
	// io.Copy lets *os.File use copy_file_range or sendfile, so the bytes
	// need not pass through this process.
	if _, err = io.Copy(out, in); err != nil {
		return err
	}
	if fi, serr := in.Stat(); serr == nil {
		os.Chmod(dst, fi.Mode().Perm()) // best effort: keep the mode a same-filesystem link keeps
	}
	return out.Sync()
}
