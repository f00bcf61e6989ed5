package powercut

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
)

// blockSize is the unit in which synced bytes are saved before a write
// over them.
const blockSize = 4096

// sectorSize is the unit in which the last kept write may be torn.
const sectorSize = 512

// fileState is what a file changed since its last fsync. A file without
// one is durable as it is.
type fileState struct {
	syncedSize int64
	undo       map[int64][]byte // block -> its synced bytes (short at the synced end)
	ops        []op             // the unsynced writes, with KeepPrefix only
}

// op is one unsynced write (data) or truncate (data nil, size).
type op struct {
	seq  uint64
	ino  uint64
	off  int64
	data []byte
	size int64
}

// entry is one name of a directory listing.
type entry struct {
	ino uint64
	dir bool
}

// state returns the file's record, making one from its current size if it
// has none. f.mu is held.
func (f *FS) state(fd int, ino uint64) (*fileState, syscall.Errno) {
	if st, ok := f.files[ino]; ok {
		return st, 0
	}
	var s syscall.Stat_t
	if err := syscall.Fstat(fd, &s); err != nil {
		return nil, gofs.ToErrno(err)
	}
	st := &fileState{syncedSize: s.Size, undo: map[int64][]byte{}}
	f.files[ino] = st
	return st, 0
}

// saveLocked saves the synced bytes of [from, to) not saved yet.
func (st *fileState) saveLocked(fd int, from, to int64) syscall.Errno {
	to = min(to, st.syncedSize)
	for b := from / blockSize; b*blockSize < to; b++ {
		if _, ok := st.undo[b]; ok {
			continue
		}
		buf := make([]byte, min(blockSize, st.syncedSize-b*blockSize))
		n, err := syscall.Pread(fd, buf, b*blockSize)
		if err != nil {
			return gofs.ToErrno(err)
		}
		st.undo[b] = buf[:n]
	}
	return 0
}

func (f *FS) saveRange(fd int, ino uint64, from, to int64) syscall.Errno {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, errno := f.state(fd, ino)
	if errno != 0 {
		return errno
	}
	return st.saveLocked(fd, from, to)
}

func (f *FS) write(fd int, ino uint64, data []byte, off int64) (uint32, syscall.Errno) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, errno := f.state(fd, ino)
	if errno != 0 {
		return 0, errno
	}
	if errno := st.saveLocked(fd, off, off+int64(len(data))); errno != 0 {
		return 0, errno
	}
	n, err := syscall.Pwrite(fd, data, off)
	if err != nil {
		return 0, gofs.ToErrno(err)
	}
	if f.opt.KeepPrefix && n > 0 {
		f.seq++
		st.ops = append(st.ops, op{seq: f.seq, ino: ino, off: off, data: slices.Clone(data[:n])})
	}
	return uint32(n), 0
}

// truncate records a truncate of the file open as fd, before it is made.
func (f *FS) truncate(fd int, size int64) syscall.Errno {
	var s syscall.Stat_t
	if err := syscall.Fstat(fd, &s); err != nil {
		return gofs.ToErrno(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	st, errno := f.state(fd, s.Ino)
	if errno != 0 {
		return errno
	}
	if errno := st.saveLocked(fd, size, st.syncedSize); errno != 0 {
		return errno
	}
	if f.opt.KeepPrefix {
		f.seq++
		st.ops = append(st.ops, op{seq: f.seq, ino: s.Ino, size: size})
	}
	return 0
}

// truncatePath records a truncate of the file at path (a backing path);
// a file that is not there is left to the operation to fail on.
func (f *FS) truncatePath(path string, size int64) syscall.Errno {
	fd, err := syscall.Open(path, syscall.O_RDWR|syscall.O_CLOEXEC, 0)
	if err != nil {
		return 0
	}
	defer syscall.Close(fd)
	return f.truncate(fd, size)
}

// syncFd makes the file's content durable as it is now.
func (f *FS) syncFd(fd int, ino uint64) syscall.Errno {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.files, ino)
	return 0
}

func (f *FS) syncPath(path string) syscall.Errno {
	var s syscall.Stat_t
	if err := syscall.Lstat(path, &s); err != nil {
		return gofs.ToErrno(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.files, s.Ino)
	return 0
}

// syncDir makes the directory's entries durable as they are now.
func (f *FS) syncDir(rel string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.dirs, rel)
}

// created records that the regular file at path (a backing path) was just
// created: its synced content is none.
func (f *FS) created(path string) {
	var s syscall.Stat_t
	if err := syscall.Lstat(path, &s); err != nil || s.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.files[s.Ino] = &fileState{undo: map[int64][]byte{}}
}

// touchDir is called before a change to name in dir (relative): the first
// change since the directory's last fsync saves its listing, and a file
// about to lose a synced name gets a hard link in limbo, so that a cut can
// give the name back.
func (f *FS) touchDir(dir, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	listing, ok := f.dirs[dir]
	if !ok {
		listing = readListing(filepath.Join(f.root, dir))
		f.dirs[dir] = listing
	}
	e, ok := listing[name]
	if !ok || e.dir {
		return
	}
	p := filepath.Join(f.root, dir, name)
	var s syscall.Stat_t
	if err := syscall.Lstat(p, &s); err != nil || s.Ino != e.ino {
		return // the synced file has lost this name already, and is in limbo
	}
	syscall.Link(p, f.limboPath(e.ino))
}

func (f *FS) limboPath(ino uint64) string {
	return filepath.Join(f.limbo, strconv.FormatUint(ino, 10))
}

// readListing lists a backing directory; one that is not there lists
// nothing.
func readListing(dir string) map[string]entry {
	out := map[string]entry{}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return out
	}
	for _, de := range ents {
		var s syscall.Stat_t
		if err := syscall.Lstat(filepath.Join(dir, de.Name()), &s); err != nil {
			continue
		}
		out[de.Name()] = entry{ino: s.Ino, dir: s.Mode&syscall.S_IFMT == syscall.S_IFDIR}
	}
	return out
}

// rollback brings the backing directory back to its last synced state, and
// forgets the tracking: what it leaves is all synced. The mount is down.
func (f *FS) rollback() (CutReport, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var rep CutReport
	var errs []error

	// Names first, parents before children: a directory given back must
	// be there before its own entries are.
	for _, rel := range slices.Sorted(func(yield func(string) bool) {
		for k := range f.dirs {
			if !yield(k) {
				return
			}
		}
	}) {
		synced := f.dirs[rel]
		dir := filepath.Join(f.root, rel)
		if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
			continue // made since the last sync of its parent, and gone with it
		}
		for name, e := range readListing(dir) {
			if s, ok := synced[name]; ok && s.dir == e.dir && (e.dir || s.ino == e.ino) {
				continue
			}
			if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
				errs = append(errs, err)
			}
			rep.Removed = append(rep.Removed, filepath.Join(rel, name))
		}
		now := readListing(dir)
		for name, s := range synced {
			if _, ok := now[name]; ok {
				continue
			}
			p := filepath.Join(dir, name)
			var err error
			if s.dir {
				err = os.Mkdir(p, 0o755)
			} else {
				err = os.Link(f.limboPath(s.ino), p)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("give back %s: %w", filepath.Join(rel, name), err))
				continue
			}
			rep.Restored = append(rep.Restored, filepath.Join(rel, name))
		}
	}

	// Then content, found by inode wherever its names now are.
	if len(f.files) > 0 {
		paths := map[uint64]string{}
		filepath.WalkDir(f.root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return nil
			}
			var s syscall.Stat_t
			if syscall.Lstat(p, &s) == nil {
				if _, ok := paths[s.Ino]; !ok {
					paths[s.Ino] = p
				}
			}
			return nil
		})
		var ops []op
		for ino, st := range f.files {
			ops = append(ops, st.ops...)
			p, ok := paths[ino]
			if !ok {
				continue
			}
			rep.Files++
			n, err := restoreFile(p, st)
			rep.BytesRestored += n
			if err != nil {
				errs = append(errs, err)
			}
		}
		if f.opt.KeepPrefix {
			slices.SortFunc(ops, func(a, b op) int { return cmp.Compare(a.seq, b.seq) })
			rep.Writes = len(ops)
			rep.Kept = f.rng.IntN(len(ops) + 1)
			var torn *op
			if rep.Kept < len(ops) && len(ops[rep.Kept].data) > sectorSize {
				o := ops[rep.Kept]
				o.data = o.data[:f.rng.IntN(len(o.data)/sectorSize+1)*sectorSize]
				rep.Torn = len(o.data)
				torn = &o
			}
			kept := ops[:rep.Kept]
			if torn != nil {
				kept = append(slices.Clone(kept), *torn)
			}
			for _, o := range kept {
				if p, ok := paths[o.ino]; ok {
					if err := applyOp(p, o); err != nil {
						errs = append(errs, err)
					}
				}
			}
		}
	}

	if err := os.RemoveAll(f.limbo); err != nil {
		errs = append(errs, err)
	}
	if err := os.Mkdir(f.limbo, 0o755); err != nil {
		errs = append(errs, err)
	}
	f.files = map[uint64]*fileState{}
	f.dirs = map[string]map[string]entry{}
	if err := errors.Join(errs...); err != nil {
		return rep, fmt.Errorf("powercut: roll back %s: %w", f.root, err)
	}
	return rep, nil
}

// restoreFile writes a file's synced blocks back and cuts it to its synced
// size.
func restoreFile(path string, st *fileState) (int64, error) {
	fh, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return 0, err
	}
	defer fh.Close()
	var n int64
	for b, data := range st.undo {
		if _, err := fh.WriteAt(data, b*blockSize); err != nil {
			return n, err
		}
		n += int64(len(data))
	}
	return n, fh.Truncate(st.syncedSize)
}

func applyOp(path string, o op) error {
	fh, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer fh.Close()
	if o.data == nil {
		return fh.Truncate(o.size)
	}
	_, err = fh.WriteAt(o.data, o.off)
	return err
}
