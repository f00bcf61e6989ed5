package mqttgw_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine of the gateway, its node and mochi ends by Close.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
