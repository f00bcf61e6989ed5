//go:build unix

package filetransfer

import "syscall"

// noFollow makes openRegular's open fail on a symbolic link.
const noFollow = syscall.O_NOFOLLOW
