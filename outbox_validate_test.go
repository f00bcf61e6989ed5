package petrel_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/petrelmq/petrel"
)

// TestConfigRefusesOneOutboxFolderSpelledTwice: Config.Validate refuses
// two outboxes on one folder written differently, as the node watches
// them, by their absolute paths; each would send every file.
func TestConfigRefusesOneOutboxFolderSpelledTwice(t *testing.T) {
	abs, err := filepath.Abs("ob")
	if err != nil {
		t.Fatal(err)
	}
	for _, second := range []string{"ob/", "./ob", abs, "x/../ob"} {
		cfg := petrel.Config{Name: "a", Outboxes: []petrel.OutboxConfig{{Dir: "ob", To: "x"}, {Dir: second, To: "y"}}}
		err := cfg.Validate()
		if !errors.Is(err, petrel.ErrConfig) || !strings.Contains(err.Error(), "outboxes[1].dir") {
			t.Errorf("ob and %s: Validate = %v; want outboxes[1].dir refused", second, err)
		}
	}
}
