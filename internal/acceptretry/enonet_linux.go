package acceptretry

import "syscall"

// enonet is Linux's ENONET, "machine is not on the network", which its
// accept(2) may return for a connection that failed in the backlog.
const enonet = syscall.ENONET
