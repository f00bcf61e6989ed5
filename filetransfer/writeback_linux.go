//go:build linux

package filetransfer

import (
	"os"
	"syscall"
)

// startWriteback asks the kernel to start writing [off, off+n) of f to
// disk now, without waiting. The Sync that follows then finds little
// left to flush, and the disk never holds a large backlog of this file's
// dirty pages, which an fsync of another file (the store's) could
// otherwise have to wait behind. Errors are ignored: Sync reports them.
func startWriteback(f *os.File, off, n int64) {
	syscall.SyncFileRange(int(f.Fd()), off, n, 0x2 /* SYNC_FILE_RANGE_WRITE */)
}

// dropCached asks the kernel to drop [off, off+n) of f from the page
// cache. It is for bytes already durable, whose pages are clean: they are
// freed at once, and the next pages the spool writes reuse them. On a
// virtual machine that hands freed memory back to its host, a page the
// kernel takes fresh costs far more CPU than one it reuses: a relay that
// kept a whole file's pages spent about 2 s of CPU per GiB getting them,
// which set the pace of a two-hop transfer. Errors are ignored: the pages
// then stay cached, as they would without the advice.
func dropCached(f *os.File, off, n int64) {
	syscall.Syscall6(syscall.SYS_FADVISE64, f.Fd(), uintptr(off), uintptr(n), 4 /* POSIX_FADV_DONTNEED */, 0, 0)
}
