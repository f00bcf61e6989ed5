package petrel_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
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
)

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
	var mu sync.Mutex
	// Unbuffered writes: a line the parent did not get was not written, so
	// "attempt" is always out before the message can be stored.
	say := func(s string) {
		mu.Lock()
		os.Stdout.WriteString(s + "\n")
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Go(func() {
			for i := 0; ; i++ {
				key := fmt.Sprintf("%s-%d-%d", round, g, i)
				m := p.CreateDataMessage("crash")
				m.Priority = uint8(i % 10)
				m.Body = []byte(key)
				say("attempt " + key)
				if err := p.Send(context.Background(), m); err != nil {
					fmt.Fprintln(os.Stderr, "send:", err)
					os.Exit(4)
				}
				say("ok " + key)
			}
		})
	}
	wg.Wait()
}

// TestCrashDurability kills a sending process with SIGKILL at random
// points, several times, then checks that every Send that returned is
// stored exactly once, and that nothing is stored that was never sent.
func TestCrashDurability(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test spawns processes")
	}
	dir := t.TempDir()
	attempted := map[string]bool{}
	acked := map[string]bool{}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	for round := 0; round < 5; round++ {
		runCrashRound(t, dir, round, time.Duration(150+rng.IntN(400))*time.Millisecond, attempted, acked)
	}
	if len(acked) == 0 {
		t.Fatal("no send returned before the kills; the test proved nothing")
	}

	n, err := petrel.Open(context.Background(), petrel.Config{Name: "crash", DataDir: dir, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	c, err := n.Consumer("crash")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for {
		d, err := c.Poll()
		if errors.Is(err, petrel.ErrNoMessage) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		seen[string(d.Body)]++
		d.Ack()
	}
	var lost, dup, unexpected int
	for k := range acked {
		if seen[k] == 0 {
			lost++
		}
	}
	for k, c := range seen {
		if c > 1 {
			dup++
		}
		if !attempted[k] {
			unexpected++
		}
	}
	t.Logf("attempted %d, returned %d, stored %d: lost %d, duplicated %d, unexpected %d", len(attempted), len(acked), len(seen), lost, dup, unexpected)
	if lost+dup+unexpected != 0 {
		t.Fatalf("lost %d, duplicated %d, unexpected %d", lost, dup, unexpected)
	}
}

func runCrashRound(t *testing.T, dir string, round int, after time.Duration, attempted, acked map[string]bool) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), envCrashDir+"="+dir, fmt.Sprintf("%s=%d", envCrashRound, round))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Kill once the child has sent for a while: the first "ok" starts the
	// countdown, so a slow start does not make a round empty.
	killed := make(chan struct{})
	var once sync.Once
	startCountdown := func() {
		once.Do(func() {
			time.AfterFunc(after, func() {
				cmd.Process.Signal(syscall.SIGKILL)
				close(killed)
			})
		})
	}
	deadline := time.AfterFunc(30*time.Second, func() { cmd.Process.Kill() })
	defer deadline.Stop()
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "attempt "):
			attempted[strings.TrimPrefix(line, "attempt ")] = true
		case strings.HasPrefix(line, "ok "):
			acked[strings.TrimPrefix(line, "ok ")] = true
			startCountdown()
		}
	}
	err = cmd.Wait()
	select {
	case <-killed:
	default:
		t.Fatalf("round %d: child ended before it was killed: %v\n%s", round, err, stderr.String())
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("round %d: child did not die of SIGKILL: %v\n%s", round, err, stderr.String())
	}
}
