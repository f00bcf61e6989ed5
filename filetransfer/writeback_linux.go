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
