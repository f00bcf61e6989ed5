package petreltest

import (
	"runtime"
	"strings"
)

// GoroutinesIn counts the goroutines whose stack holds fn, a function's
// name as a stack trace prints it ("sender.(*Sender).ackLoop"): what a
// test of a component's idle cost looks for.
func GoroutinesIn(fn string) int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, fn) {
			count++
		}
	}
	return count
}
