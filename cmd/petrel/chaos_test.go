package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"
)

// TestChaos runs `petrel chaos` as an operator would, with 3 nodes for 60
// seconds (PETREL_LONG=1: 10 minutes; PETREL_CHAOS_DURATION sets any
// duration): nodes killed every 5 s, a link dropped every 3 s, a node cut
// off every 20 s. The command checks the stores itself; the test reads its
// JSON and fails on any lost, duplicated, unexpected or out-of-order
// message, on a node that ended by itself, or on a run where the faults or
// the traffic did not happen.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("the chaos run takes a minute; it runs without -short")
	}
	duration := time.Minute
	if os.Getenv("PETREL_LONG") == "1" {
		duration = 10 * time.Minute
	}
	if d, err := time.ParseDuration(os.Getenv("PETREL_CHAOS_DURATION")); err == nil {
		duration = d
	}
	args := []string{"chaos", "--nodes", "3", "--duration", duration.String(), "--kill-every", "5s",
		"--flap-every", "3s", "--partition-every", "20s", "--rate", "50", "--json"}
	if seed := os.Getenv("PETREL_SEED"); seed != "" {
		args = append(args, "--seed", seed)
	}
	r := runPetrel(t, duration+10*time.Minute, args...)
	var res chaosResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("exit status %d, no JSON result: %v\nstdout:\n%s\nstderr:\n%s", r.code, err, r.stdout, r.stderr)
	}
	tot := res.Check.Total
	t.Logf("seed %d (replay with PETREL_SEED): %v, %d kills, %d flaps, %d partitions, %d crashed, settled in %s; %d attempted, %d copies due, %d stored; lost %d, duplicated %d, unexpected %d, out of order %d, corrupt %d",
		res.Seed, duration, res.Kills, res.Flaps, res.Parts, res.Crashed, res.SettleFor, res.Attempted, tot.Ok, tot.Stored,
		tot.Lost, tot.Duplicated, tot.Unexpected, tot.OutOfOrder, tot.Corrupt)
	if !res.Pass || r.code != 0 {
		t.Errorf("chaos run failed (exit status %d): %s\nerrors: %s", r.code, strings.Join(res.Check.Examples, "\n"), strings.Join(res.Errors, "\n"))
	}
	wantKills := int(duration / (5 * time.Second) / 2)
	if res.Kills < wantKills || res.Flaps == 0 || tot.Ok == 0 {
		t.Errorf("the run did too little: %d kills (want %d or more), %d flaps, %d copies due", res.Kills, wantKills, res.Flaps, tot.Ok)
	}
	// Every group of the three producers, the queue and topic kinds and
	// ten priorities must have had traffic, and files some: a checker that
	// saw nothing proves nothing.
	kinds := map[string]int{}
	for g, c := range res.Check.Groups {
		if c.Ok > 0 {
			kinds[strings.Fields(g)[1]]++
		}
	}
	if kinds["queue"] != 30 || kinds["topic"] != 30 || kinds["file"] == 0 {
		t.Errorf("groups with traffic per kind: %v, want 30 queue, 30 topic and some file groups", kinds)
	}
}
