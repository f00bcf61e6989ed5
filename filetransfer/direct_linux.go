//go:build linux

package filetransfer

import (
	"os"
	"syscall"
	"unsafe"
)

// directAlign is the alignment O_DIRECT asks of a write's buffer, offset
// and length: 4096 covers disks of 512- and 4096-byte sectors.
const directAlign = 4096

// setDirect turns O_DIRECT on or off for f. It reports false, and leaves
// f as it was, where the filesystem takes no direct I/O (tmpfs, some FUSE
// filesystems) or the kernel refuses the flag.
func setDirect(f *os.File, on bool) bool {
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	ok := false
	err = rc.Control(func(fd uintptr) {
		flags, _, errno := syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_GETFL, 0)
		if errno != 0 {
			return
		}
		if on {
			flags |= syscall.O_DIRECT
		} else {
			flags &^= syscall.O_DIRECT
		}
		_, _, errno = syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_SETFL, flags)
		ok = errno == 0
	})
	return err == nil && ok
}

// directFits reports whether n bytes can be written at off with O_DIRECT,
// from a buffer that is aligned.
func directFits(n int, off int64) bool {
	return n > 0 && n%directAlign == 0 && off%directAlign == 0
}

// aligned reports whether p starts at an address O_DIRECT takes.
func aligned(p []byte) bool {
	return uintptr(unsafe.Pointer(unsafe.SliceData(p)))%directAlign == 0
}

// alignedBuffer returns n bytes that start at an aligned address.
func alignedBuffer(n int) []byte {
	b := make([]byte, n+directAlign)
	skip := 0
	if r := int(uintptr(unsafe.Pointer(unsafe.SliceData(b))) % directAlign); r != 0 {
		skip = directAlign - r
	}
	return b[skip : skip+n : skip+n]
}
