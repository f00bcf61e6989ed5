package powercut

import (
	"context"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// node is a loopback node whose changes are recorded before they are
// made.
type node struct {
	fs.LoopbackNode
	fs *FS
}

// rel is the node's path relative to the mount.
func (n *node) rel() string {
	return n.Path(n.RootData.RootNode.EmbeddedInode())
}

func (n *node) backing() string { return filepath.Join(n.fs.root, n.rel()) }

// openFlags makes every file readable by the layer, which reads a block's
// synced bytes before the first write over them, and drops O_APPEND, as
// the loopback does (the kernel gives the offsets).
func openFlags(flags uint32) uint32 {
	if flags&syscall.O_ACCMODE == syscall.O_WRONLY {
		flags = flags&^syscall.O_ACCMODE | syscall.O_RDWR
	}
	return flags
}

// fuseFlags asks for direct I/O, so that every write comes here when it is
// made; not for SQLite's shared memory, which is mapped and need not last.
func fuseFlags(name string) uint32 {
	if strings.HasSuffix(name, "-shm") {
		return 0
	}
	return fuse.FOPEN_DIRECT_IO
}

var (
	_ fs.NodeCreater        = (*node)(nil)
	_ fs.NodeOpener         = (*node)(nil)
	_ fs.NodeMkdirer        = (*node)(nil)
	_ fs.NodeMknoder        = (*node)(nil)
	_ fs.NodeSymlinker      = (*node)(nil)
	_ fs.NodeLinker         = (*node)(nil)
	_ fs.NodeUnlinker       = (*node)(nil)
	_ fs.NodeRmdirer        = (*node)(nil)
	_ fs.NodeRenamer        = (*node)(nil)
	_ fs.NodeSetattrer      = (*node)(nil)
	_ fs.NodeFsyncer        = (*node)(nil)
	_ fs.NodeCopyFileRanger = (*node)(nil)
)

func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	dir := n.rel()
	n.fs.touchDir(dir, name)
	ch, fh, _, errno := n.LoopbackNode.Create(ctx, name, openFlags(flags), mode, out)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	h, errno := n.fs.newHandle(fh, true)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	return ch, h, fuseFlags(name), 0
}

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if flags&syscall.O_TRUNC != 0 {
		if errno := n.fs.truncatePath(n.backing(), 0); errno != 0 {
			return nil, 0, errno
		}
	}
	fh, _, errno := n.LoopbackNode.Open(ctx, openFlags(flags))
	if errno != 0 {
		return nil, 0, errno
	}
	h, errno := n.fs.newHandle(fh, false)
	if errno != 0 {
		return nil, 0, errno
	}
	return h, fuseFlags(filepath.Base(n.rel())), 0
}

func (n *node) OpendirHandle(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	ds, errno := fs.NewLoopbackDirStream(n.backing())
	if errno != 0 {
		return nil, 0, errno
	}
	return &dirHandle{DirStream: ds, fs: n.fs, rel: n.rel()}, 0, 0
}

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	n.fs.touchDir(n.rel(), name)
	return n.LoopbackNode.Mkdir(ctx, name, mode, out)
}

func (n *node) Mknod(ctx context.Context, name string, mode, rdev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	n.fs.touchDir(n.rel(), name)
	ch, errno := n.LoopbackNode.Mknod(ctx, name, mode, rdev, out)
	if errno == 0 {
		n.fs.created(filepath.Join(n.backing(), name))
	}
	return ch, errno
}

func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	n.fs.touchDir(n.rel(), name)
	return n.LoopbackNode.Symlink(ctx, target, name, out)
}

func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	n.fs.touchDir(n.rel(), name)
	return n.LoopbackNode.Link(ctx, target, name, out)
}

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	n.fs.touchDir(n.rel(), name)
	return n.LoopbackNode.Unlink(ctx, name)
}

func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	n.fs.touchDir(n.rel(), name)
	return n.LoopbackNode.Rmdir(ctx, name)
}

func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	np, ok := newParent.(*node)
	if !ok {
		return syscall.EXDEV
	}
	var st syscall.Stat_t
	if err := syscall.Lstat(filepath.Join(n.backing(), name), &st); err != nil {
		return fs.ToErrno(err)
	}
	if st.Mode&syscall.S_IFMT == syscall.S_IFDIR {
		// Directories are tracked by path; a renamed one would take its
		// record's key with it.
		return syscall.EXDEV
	}
	n.fs.touchDir(n.rel(), name)
	np.fs.touchDir(np.rel(), newName)
	return n.LoopbackNode.Rename(ctx, name, &np.LoopbackNode, newName, flags)
}

func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if sz, ok := in.GetSize(); ok {
		var errno syscall.Errno
		if h, ok := f.(*handle); ok {
			errno = n.fs.truncate(h.fd, int64(sz))
		} else {
			errno = n.fs.truncatePath(n.backing(), int64(sz))
		}
		if errno != 0 {
			return errno
		}
	}
	if h, ok := f.(*handle); ok {
		f = h.lf
	}
	return n.LoopbackNode.Setattr(ctx, f, in, out)
}

// Fsync is reached when the kernel has no handle to send it to.
func (n *node) Fsync(ctx context.Context, f fs.FileHandle, flags uint32) syscall.Errno {
	if h, ok := f.(*handle); ok {
		return h.Fsync(ctx, flags)
	}
	if n.IsDir() {
		n.fs.syncDir(n.rel())
		return 0
	}
	return n.fs.syncPath(n.backing())
}

// CopyFileRange is refused, so that the kernel copies through reads and
// writes, which the layer sees.
func (n *node) CopyFileRange(ctx context.Context, fhIn fs.FileHandle, offIn uint64, out *fs.Inode, fhOut fs.FileHandle, offOut uint64, len uint64, flags uint64) (uint32, syscall.Errno) {
	return 0, syscall.ENOSYS
}

// handle is an open file: reads pass through, writes and truncates are
// recorded first, fsyncs are recorded only.
type handle struct {
	lf  *fs.LoopbackFile
	fs  *FS
	fd  int
	ino uint64
}

var (
	_ fs.FileReader    = (*handle)(nil)
	_ fs.FileWriter    = (*handle)(nil)
	_ fs.FileFsyncer   = (*handle)(nil)
	_ fs.FileReleaser  = (*handle)(nil)
	_ fs.FileFlusher   = (*handle)(nil)
	_ fs.FileGetattrer = (*handle)(nil)
	_ fs.FileSetattrer = (*handle)(nil)
	_ fs.FileLseeker   = (*handle)(nil)
	_ fs.FileAllocater = (*handle)(nil)
)

// newHandle wraps the loopback's handle. created says the file was just
// created: its synced content is none.
func (f *FS) newHandle(fh fs.FileHandle, created bool) (*handle, syscall.Errno) {
	lf := fh.(*fs.LoopbackFile)
	fd, _ := lf.PassthroughFd()
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		lf.Release(context.Background())
		return nil, fs.ToErrno(err)
	}
	if created {
		f.mu.Lock()
		f.files[st.Ino] = &fileState{undo: map[int64][]byte{}}
		f.mu.Unlock()
	}
	return &handle{lf: lf, fs: f, fd: fd, ino: st.Ino}, 0
}

func (h *handle) Read(ctx context.Context, buf []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return h.lf.Read(ctx, buf, off)
}

func (h *handle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	return h.fs.write(h.fd, h.ino, data, off)
}

func (h *handle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	return h.fs.syncFd(h.fd, h.ino)
}

func (h *handle) Release(ctx context.Context) syscall.Errno { return h.lf.Release(ctx) }
func (h *handle) Flush(ctx context.Context) syscall.Errno   { return h.lf.Flush(ctx) }
func (h *handle) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	return h.lf.Getattr(ctx, out)
}

func (h *handle) Setattr(ctx context.Context, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if sz, ok := in.GetSize(); ok {
		if errno := h.fs.truncate(h.fd, int64(sz)); errno != 0 {
			return errno
		}
	}
	return h.lf.Setattr(ctx, in, out)
}

func (h *handle) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	return h.lf.Lseek(ctx, off, whence)
}

func (h *handle) Allocate(ctx context.Context, off uint64, size uint64, mode uint32) syscall.Errno {
	if mode&^0x1 != 0 { // anything past FALLOC_FL_KEEP_SIZE may change content
		if errno := h.fs.saveRange(h.fd, h.ino, int64(off), int64(off+size)); errno != 0 {
			return errno
		}
	}
	return h.lf.Allocate(ctx, off, size, mode)
}

// dirHandle is an open directory; its fsync makes its entries durable.
type dirHandle struct {
	fs.DirStream
	fs  *FS
	rel string
}

var (
	_ fs.FileReaddirenter = (*dirHandle)(nil)
	_ fs.FileSeekdirer    = (*dirHandle)(nil)
	_ fs.FileReleasedirer = (*dirHandle)(nil)
	_ fs.FileFsyncdirer   = (*dirHandle)(nil)
)

func (d *dirHandle) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	return d.DirStream.(fs.FileReaddirenter).Readdirent(ctx)
}

func (d *dirHandle) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	return d.DirStream.(fs.FileSeekdirer).Seekdir(ctx, off)
}

func (d *dirHandle) Releasedir(ctx context.Context, flags uint32) {
	d.DirStream.(fs.FileReleasedirer).Releasedir(ctx, flags)
}

func (d *dirHandle) Fsyncdir(ctx context.Context, flags uint32) syscall.Errno {
	d.fs.syncDir(d.rel)
	return 0
}
