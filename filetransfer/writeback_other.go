//go:build !linux

package filetransfer

import "os"

// startWriteback does nothing where sync_file_range does not exist.
func startWriteback(*os.File, int64, int64) {}

// dropCached does nothing where the page cache advice is not used.
func dropCached(*os.File, int64, int64) {}
