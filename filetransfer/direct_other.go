//go:build !linux

package filetransfer

import "os"

// setDirect reports false: direct I/O is used on Linux only.
func setDirect(*os.File, bool) bool { return false }

func directFits(int, int64) bool { return false }

func aligned([]byte) bool { return false }

func alignedBuffer(n int) []byte { return make([]byte, n) }
