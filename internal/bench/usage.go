package bench

import (
	"fmt"
	"os"
	"time"

	"github.com/petrelmq/petrel/queue"
)

// UsageError is returned when a bench or an agent is given a flag value it
// cannot run with. The CLI prints it with the command's usage and exits 2;
// its text names the flag and what it wants.
type UsageError struct{ msg string }

func (e *UsageError) Error() string { return e.msg }

// usageErrorf returns a *UsageError.
func usageErrorf(format string, args ...any) error {
	return &UsageError{msg: fmt.Sprintf(format, args...)}
}

// parseSync reads a --sync flag as the config file spells the modes.
func parseSync(s string) (queue.SyncMode, error) {
	switch s {
	case "full":
		return queue.SyncFull, nil
	case "normal":
		return queue.SyncNormal, nil
	}
	return 0, usageErrorf("invalid argument %q for \"--sync\" flag: want full or normal", s)
}

// checkTimeout refuses a --timeout that is not positive.
func checkTimeout(d time.Duration) error {
	if d <= 0 {
		return usageErrorf("invalid argument %v for \"--timeout\" flag: want a positive duration", d)
	}
	return nil
}

// checkDir refuses a --dir that is given and not a folder.
func checkDir(dir string) error {
	if dir == "" {
		return nil
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return usageErrorf("invalid argument %q for \"--dir\" flag: not a folder", dir)
	}
	return nil
}
