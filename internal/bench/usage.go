package bench

import (
	"fmt"

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
