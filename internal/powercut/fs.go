package powercut

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Options tune a mount.
type Options struct {
	// KeepPrefix keeps, on each cut, a random prefix of the unsynced
	// writes (in the order they were made), the last one possibly torn at
	// a sector; without it every unsynced write is lost.
	KeepPrefix bool
	// Seed seeds the choice of the prefix; each cut draws from the same
	// generator, so a run with the same seed and the same writes cuts the
	// same way.
	Seed uint64
	// Logf, if set, receives one line per cut.
	Logf func(format string, args ...any)
}

// CutReport says what a cut did.
type CutReport struct {
	// Files is how many files had unsynced content.
	Files int
	// Writes is how many unsynced writes and truncates there were (counted
	// with KeepPrefix only), Kept how many of them survived, and Torn the
	// bytes kept of the write that was cut in the middle.
	Writes, Kept, Torn int
	// BytesRestored is how many synced bytes were written back over
	// unsynced ones.
	BytesRestored int64
	// Removed are the names that vanished (unsynced creates and rename
	// targets), Restored the names given back (unsynced unlinks and rename
	// sources), relative to the mount.
	Removed, Restored []string
}

func (r CutReport) String() string {
	return fmt.Sprintf("%d files rolled back (%d bytes written back), %d names removed, %d given back, %d of %d unsynced writes kept (torn %d bytes)",
		r.Files, r.BytesRestored, len(r.Removed), len(r.Restored), r.Kept, r.Writes, r.Torn)
}

// FS is a mounted power-cut filesystem.
type FS struct {
	mountpoint string
	root       string // the backing directory the mount shows
	limbo      string // hard links to files that lost a synced name
	opt        Options
	rng        *rand.Rand

	mountMu sync.Mutex // guards server
	server  *fuse.Server

	mu    sync.Mutex // guards what follows: the tracking since the last cut
	files map[uint64]*fileState
	dirs  map[string]map[string]entry // dir (relative) -> its synced listing, for dirs changed since
	seq   uint64
}

// Mount mounts a power-cut filesystem at mountpoint, whose content lives
// under backing (root/ is what the mount shows, limbo/ is the layer's).
// Both directories are created if needed. Everything already in backing
// counts as synced.
func Mount(mountpoint, backing string, opt Options) (*FS, error) {
	f := &FS{
		mountpoint: mountpoint,
		root:       filepath.Join(backing, "root"),
		limbo:      filepath.Join(backing, "limbo"),
		opt:        opt,
		rng:        rand.New(rand.NewPCG(opt.Seed, opt.Seed^0x9e3779b97f4a7c15)),
	}
	for _, d := range []string{mountpoint, f.root, f.limbo} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("powercut: %w", err)
		}
	}
	if err := f.mount(); err != nil {
		return nil, err
	}
	return f, nil
}

// Dir is the mountpoint.
func (f *FS) Dir() string { return f.mountpoint }

// Backing is the backing directory the mount shows.
func (f *FS) Backing() string { return f.root }

func (f *FS) mount() error {
	f.mu.Lock()
	f.files = map[uint64]*fileState{}
	f.dirs = map[string]map[string]entry{}
	f.mu.Unlock()
	var st syscall.Stat_t
	if err := syscall.Stat(f.root, &st); err != nil {
		return fmt.Errorf("powercut: %w", err)
	}
	lr := &fs.LoopbackRoot{Path: f.root, Dev: uint64(st.Dev)}
	lr.NewNode = func(r *fs.LoopbackRoot, _ *fs.Inode, _ string, _ *syscall.Stat_t) fs.InodeEmbedder {
		return &node{LoopbackNode: fs.LoopbackNode{RootData: r}, fs: f}
	}
	rootNode := lr.NewNode(lr, nil, "", &st)
	lr.RootNode = rootNode
	// All changes go through this kernel, so its caches stay true until a
	// cut, which unmounts.
	timeout := time.Second
	server, err := fs.Mount(f.mountpoint, rootNode, &fs.Options{
		EntryTimeout: &timeout,
		AttrTimeout:  &timeout,
		MountOptions: fuse.MountOptions{
			FsName:      "powercut",
			Name:        "powercut",
			DirectMount: true,
		},
	})
	if err != nil {
		return fmt.Errorf("powercut: mount %s: %w", f.mountpoint, err)
	}
	f.mountMu.Lock()
	f.server = server
	f.mountMu.Unlock()
	return nil
}

// unmount unmounts, retrying while the kernel still counts a file open
// (a killed process's files are closed as it exits, the kernel's release
// of them may lag).
func (f *FS) unmount() error {
	f.mountMu.Lock()
	defer f.mountMu.Unlock()
	if f.server == nil {
		return nil
	}
	var err error
	for range 100 {
		if err = f.server.Unmount(); err == nil {
			f.server.Wait()
			f.server = nil
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("powercut: unmount %s (is a process still using it?): %w", f.mountpoint, err)
}

// Close unmounts. The backing directory keeps what was written, synced or
// not. Close may be called more than once.
func (f *FS) Close() error { return f.unmount() }

// Cut cuts the power: it unmounts (every process using the mount must
// have been killed), rolls every file and directory back to its last
// synced state, keeps a random prefix of the unsynced writes if asked,
// and mounts again.
func (f *FS) Cut() (CutReport, error) { return f.CutAndCheck(nil) }

// CutAndCheck is Cut, and runs check on the backing directory after the
// rollback, before the mount is back: what a check finds there is what
// the next process will find. A process that serves a FUSE mount must not
// map files of it, as SQLite does, so a test opens a store on the
// backing directory, never through the mount.
func (f *FS) CutAndCheck(check func(backing string) error) (CutReport, error) {
	if err := f.unmount(); err != nil {
		return CutReport{}, err
	}
	rep, err := f.rollback()
	if err != nil {
		return rep, err
	}
	if f.opt.Logf != nil {
		f.opt.Logf("power cut at %s: %s", f.mountpoint, rep)
	}
	if check != nil {
		if err := check(f.root); err != nil {
			return rep, err
		}
	}
	return rep, f.mount()
}

// Sync makes everything durable, as sync(2) would: the state from which
// later cuts roll back. Tests use it for set-up that is not under test.
func (f *FS) Sync() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.files = map[uint64]*fileState{}
	f.dirs = map[string]map[string]entry{}
}
