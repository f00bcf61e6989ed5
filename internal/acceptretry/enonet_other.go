//go:build !linux

package acceptretry

import "syscall"

// enonet is ENONET where it exists (Linux); elsewhere an errno that no
// accept returns.
const enonet = syscall.Errno(0)
