//go:build darwin || dragonfly || freebsd || netbsd || openbsd

package address

import "syscall"

// soReusePort: the BSDs let two sockets bind the same address and port only
// when both set SO_REUSEPORT.
const soReusePort = syscall.SO_REUSEPORT
