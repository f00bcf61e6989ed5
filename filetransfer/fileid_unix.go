//go:build unix

package filetransfer

import (
	"io/fs"
	"syscall"
)

func devIno(fi fs.FileInfo) (dev, ino uint64) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Dev), uint64(st.Ino) //nolint:unconvert // Dev's type differs between systems
	}
	return 0, 0
}
