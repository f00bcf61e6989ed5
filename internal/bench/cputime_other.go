//go:build !unix

package bench

import "time"

// processCPU reports that this system does not say (see cputime_unix.go).
func processCPU() (time.Duration, bool) { return 0, false }
