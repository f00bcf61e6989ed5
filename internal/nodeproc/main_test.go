package nodeproc

import (
	"testing"

	"go.uber.org/goleak"
)

// A Proc owns the goroutines that copy its child's output and wait for
// it; none may outlive the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
