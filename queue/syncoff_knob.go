//go:build petrel_testknobs

package queue

import (
	"fmt"
	"os"
)

// SyncOffEnv, set to 1 in the environment of a binary built with the
// petrel_testknobs tag, turns every fsync of the store off (see
// syncOffForTest). The power-loss tests build the nodes they run with the
// tag; `PETREL_TEST_SYNC_OFF=1 go test -run TestPowerLoss ./cmd/petrel`
// must fail.
const SyncOffEnv = "PETREL_TEST_SYNC_OFF"

func init() {
	if os.Getenv(SyncOffEnv) == "1" {
		syncOffForTest = true
		fmt.Fprintf(os.Stderr, "%s=1: the store runs with synchronous=OFF, for a test\n", SyncOffEnv)
	}
}
