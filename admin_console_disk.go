//go:build linux || darwin || freebsd

package petrel

import "syscall"

// diskFree is the space an unprivileged writer has left on the file
// system of dir, -1 if unknown.
func diskFree(dir string) int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return -1
	}
	return int64(st.Bavail) * int64(st.Bsize)
}
