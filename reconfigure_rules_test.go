package petrel

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/petrelmq/petrel/internal/reload"
)

// TestReloadRulesCoverConfig asks whoever adds a field to Config to decide,
// in the table of internal/reload, whether a change to it applies live,
// and checks that no rule names a field that is gone.
func TestReloadRulesCoverConfig(t *testing.T) {
	ct := reflect.TypeFor[Config]()
	var ruled []string
	for _, r := range reload.Rules {
		if r.Field == "" {
			continue
		}
		if _, ok := ct.FieldByName(r.Field); !ok {
			t.Errorf("the rule of %q names Config.%s, which is gone", r.Key, r.Field)
		}
		ruled = append(ruled, r.Field)
	}
	for f := range ct.Fields() {
		if !slices.Contains(ruled, f.Name) {
			t.Errorf("Config.%s has no rule in internal/reload: decide whether a change to it applies live", f.Name)
		}
	}
}

// TestRestartOnlySettingsAreKept changes every restart-only setting and
// checks that each is reported by its key and kept as it was.
func TestRestartOnlySettingsAreKept(t *testing.T) {
	old := Config{Name: "a", DataDir: "d", Listen: "127.0.0.1:1", MaxAutoQueues: 5}
	cfg := old
	cfg.Name, cfg.DataDir, cfg.Listen, cfg.MaxAutoQueues = "b", "e", "127.0.0.1:2", 6
	cfg.Store.MaxMessages = 9
	cfg.Secret = "live"
	want := []string{"node.name", "node.data_dir", "listen", "store", "max_auto_queues"}
	if got := restartNeeded(old, cfg); !slices.Equal(got, want) {
		t.Errorf("restartNeeded = %v, want %v", got, want)
	}
	next := keepRestartOnly(cfg, old)
	want2 := old
	want2.Secret = "live"
	if !reflect.DeepEqual(next, want2) {
		t.Errorf("keepRestartOnly = %+v, want %+v", next, want2)
	}
	// The store's hooks are no setting.
	cfg = old
	cfg.Store.Now = time.Now
	if got := restartNeeded(old, cfg); len(got) != 0 {
		t.Errorf("restartNeeded with a new clock = %v, want none", got)
	}
}
