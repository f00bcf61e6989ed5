package petrel_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	petrel "github.com/petrelmq/petrel"
)

func haConfig(dir string, role petrel.HARole) petrel.Config {
	return petrel.Config{Name: "pair", DataDir: dir, HA: petrel.HAConfig{Role: role},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// TestHASplitBrainImpossible: while a live holds the lock, a second live
// is refused at once and a backup waits without opening the store; when
// the live closes, the waiting backup takes over the same store and
// identity and finds what the live stored.
func TestHASplitBrainImpossible(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	live, err := petrel.Open(ctx, haConfig(dir, petrel.HARoleLive))
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if err := live.Producer().Send(ctx, live.Producer().CreateDataMessage("q")); err != nil {
		t.Fatal(err)
	}
	if st := live.Status(); st.HA == nil || st.HA.Role != petrel.HARoleLive {
		t.Fatalf("live status ha %+v", st.HA)
	}

	second, err := petrel.Open(ctx, haConfig(dir, petrel.HARoleLive))
	if !errors.Is(err, petrel.ErrHALocked) {
		if second != nil {
			second.Close()
		}
		t.Fatalf("a second live on a held lock: %v, want ErrHALocked", err)
	}

	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if b, err := petrel.Open(short, haConfig(dir, petrel.HARoleBackup)); !errors.Is(err, context.DeadlineExceeded) {
		if b != nil {
			b.Close()
		}
		t.Fatalf("a backup on a held lock returned %v, want to wait until its context ended", err)
	}

	type opened struct {
		n   *petrel.Node
		err error
	}
	got := make(chan opened, 1)
	go func() {
		cfg := haConfig(dir, petrel.HARoleBackup)
		cfg.Admin.Listen = "127.0.0.1:0"
		n, err := petrel.Open(ctx, cfg)
		got <- opened{n, err}
	}()
	select {
	case o := <-got:
		t.Fatalf("the backup opened while the live held the lock: %v", o.err)
	case <-time.After(300 * time.Millisecond):
	}
	liveID := live.ID()
	closed := time.Now()
	if err := live.Close(); err != nil {
		t.Fatal(err)
	}
	o := <-got
	if o.err != nil {
		t.Fatalf("backup after the live closed: %v", o.err)
	}
	backup := o.n
	defer backup.Close()
	st := backup.Status()
	if st.HA == nil || st.HA.Role != petrel.HARoleBackup || st.HA.Since.Before(closed) {
		t.Errorf("backup status ha %+v, want backup since after %v", st.HA, closed)
	}
	if backup.ID() != liveID {
		t.Errorf("backup id %s, live's %s: not the same identity", backup.ID(), liveID)
	}
	if q, ok := backup.QueueStat("q"); !ok || q.Depth != 1 {
		t.Errorf("backup's queue q: %+v, want the live's one message", q)
	}
	resp, err := http.Get("http://" + backup.AdminAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `petrel_ha_role{role="backup"} 1`) {
		t.Errorf("metrics lack petrel_ha_role{role=\"backup\"} 1")
	}
	var since float64
	for l := range strings.SplitSeq(string(body), "\n") {
		if v, ok := strings.CutPrefix(l, "petrel_ha_since_seconds "); ok {
			fmt.Sscan(v, &since)
		}
	}
	if want := float64(st.HA.Since.UnixNano()) / 1e9; since < want-1 || since > want+1 {
		t.Errorf("petrel_ha_since_seconds %v, want %v", since, want)
	}
}

func TestHAConfigRefused(t *testing.T) {
	for _, c := range []petrel.HAConfig{
		{Role: "leader"},
		{Role: petrel.HARoleLive, Lock: "../ha.lock"},
		{Role: petrel.HARoleLive, Lock: "sub/ha.lock"},
		{Lock: "ha.lock"},
	} {
		cfg := haConfig(t.TempDir(), "")
		cfg.HA = c
		if err := cfg.Validate(); err == nil {
			t.Errorf("%+v validated", c)
		}
		if n, err := petrel.Open(context.Background(), cfg); err == nil {
			n.Close()
			t.Errorf("%+v opened", c)
		}
	}
}
