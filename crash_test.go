package petrel_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/petrelmq/petrel"
)

const (
	envCrashDir   = "PETREL_CRASH_DIR"
	envCrashRound = "PETREL_CRASH_ROUND"
	// envSeed replays a crash test's random choices: each test logs the
	// seed it used.
	envSeed = "PETREL_SEED"
)

// crashRand returns the test's random source, seeded from PETREL_SEED when
// set, else from the clock, and logs the seed so that a failure can be
// replayed: PETREL_SEED=<seed> go test -run <test>.
func crashRand(t *testing.T) *rand.Rand {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(envSeed); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: want an unsigned integer: %v", envSeed, s, err)
		}
		seed = v
	}
	t.Logf("seed %d (replay with %s=%d)", seed, envSeed, seed)
	return rand.New(rand.NewPCG(seed, 7))
}

// TestCrashChild is the child process of TestCrashDurability. It sends in a
// loop from several goroutines and reports each message on stdout twice:
// "attempt" before Send, "ok" once Send returned. It never returns by
// itself: the parent kills it with SIGKILL.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(envCrashDir)
	if dir == "" {
		t.Skip("child process of TestCrashDurability")
	}
	round := os.Getenv(envCrashRound)
	n, err := petrel.Open(context.Background(), petrel.Config{Name: "crash", DataDir: dir, Logger: quiet})
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		os.Exit(3)
	}
	p := n.Producer()
	say := childSay()
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Go(func() {
			for i := 0; ; i++ {
				key := crashKey{producer: fmt.Sprintf("%s-%d", round, g), seq: i}
				m := key.message(p, "crash")
				say("attempt " + key.String())
				if err := p.Send(context.Background(), m); err != nil {
					fmt.Fprintln(os.Stderr, "send:", err)
					os.Exit(4)
				}
				say("ok " + key.String())
			}
		})
	}
	wg.Wait()
}

// childSay returns a func that writes one line to stdout, unbuffered: a
// line the parent did not get was not written, so "attempt" is always out
// before the message can be stored, and "acked" only after Ack returned.
func childSay() func(string) {
	var mu sync.Mutex
	return func(s string) {
		mu.Lock()
		os.Stdout.WriteString(s + "\n")
		mu.Unlock()
	}
}

// TestCrashDurability kills a sending process with SIGKILL at random
// points, several times, then checks that every Send that returned is
// stored exactly once, whole (body, properties and headers as sent), that
// nothing is stored that was never sent, that each producer's messages of
// one priority come out in the order it sent them, and that the queue's
// depth matches what was read and is zero once all is acked.
func TestCrashDurability(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test spawns processes")
	}
	dir := t.TempDir()
	attempted := map[string]bool{}
	acked := map[string]bool{}
	rng := crashRand(t)
	for round := 0; round < 5; round++ {
		after := time.Duration(150+rng.IntN(400)) * time.Millisecond
		var once sync.Once
		runChild(t, "TestCrashChild", []string{envCrashDir + "=" + dir, fmt.Sprintf("%s=%d", envCrashRound, round)},
			func(line string, kill func()) {
				if k, ok := strings.CutPrefix(line, "attempt "); ok {
					attempted[k] = true
				} else if k, ok := strings.CutPrefix(line, "ok "); ok {
					acked[k] = true
					// The first ok starts the countdown, so that a slow
					// start does not make a round empty.
					once.Do(func() { time.AfterFunc(after, kill) })
				}
			})
	}
	if len(acked) == 0 {
		t.Fatal("no send returned before the kills; the test proved nothing")
	}
	got := readBack(t, petrel.Config{Name: "crash", DataDir: dir, Logger: quiet}, "crash")
	var lost int
	for k := range acked {
		if got.seen[k] == 0 {
			lost++
		}
	}
	unexpected := 0
	for k := range got.seen {
		if !attempted[k] {
			unexpected++
		}
	}
	t.Logf("attempted %d, returned %d, stored %d: lost %d, duplicated %d, unexpected %d, altered %d, out of order %d",
		len(attempted), len(acked), len(got.seen), lost, got.duplicated, unexpected, got.altered, got.disorder)
	if lost+got.duplicated+unexpected+got.altered+got.disorder != 0 {
		t.Fatalf("lost %d, duplicated %d, unexpected %d, altered %d, out of order %d; examples:\n%s",
			lost, got.duplicated, unexpected, got.altered, got.disorder, strings.Join(got.examples, "\n"))
	}
}

// runChild runs the test named child of this binary in a child process
// with env added, and hands each line it prints to onLine, with a kill
// that sends SIGKILL. The child must die of that SIGKILL: one that ended
// by itself, or of anything else, fails the test.
func runChild(t *testing.T, child string, env []string, onLine func(line string, kill func())) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+child+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := make(chan struct{})
	var once sync.Once
	kill := func() {
		once.Do(func() {
			// Marked before it is sent: the child dies at once, and
			// Wait may return before this goroutine runs again.
			close(killed)
			cmd.Process.Signal(syscall.SIGKILL)
		})
	}
	deadline := time.AfterFunc(60*time.Second, func() { cmd.Process.Kill() })
	defer deadline.Stop()
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		onLine(sc.Text(), kill)
	}
	err = cmd.Wait()
	select {
	case <-killed:
	default:
		t.Fatalf("%s ended before it was killed: %v\n%s", child, err, stderr.String())
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("%s did not die of SIGKILL: %v\n%s", child, err, stderr.String())
	}
}
