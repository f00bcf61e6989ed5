package conf

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine outlives them: a
// Watcher's watchLoop must end at Close.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
