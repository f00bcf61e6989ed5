//go:build !(linux || darwin || freebsd)

package petrel

// diskFree is unknown (-1) where statfs is not at hand.
func diskFree(string) int64 { return -1 }
