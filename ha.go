package petrel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/gofrs/flock"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"
)

// ErrHALocked is returned by Open for a live node (HAConfig.Role live)
// whose data directory's lock is held by another process: the other live,
// or the backup that took over. Nothing in the directory was opened.
var ErrHALocked = errors.New("the data directory's HA lock is held by another process")

// defaultHALock is the lock file's name when HAConfig.Lock is empty.
const defaultHALock = "ha.lock"

// haPoll is how often a waiting backup tries the lock. flock has no
// blocking wait that a context can end, so it polls; 100 ms is a tenth
// of the takeover time a peer's reconnect backoff adds anyway.
const haPoll = 100 * time.Millisecond

// HAStatus is a node's part in a live/backup pair, for status.
type HAStatus struct {
	Role HARole `json:"role"`
	// Since is when this process took the lock and opened the store: for
	// a backup, when it took over.
	Since time.Time `json:"since"`
	// Lock is the path of the lock file.
	Lock string `json:"lock"`
}

// haHold is the lock a node of a pair holds while its store is open; nil
// for a standalone node.
type haHold struct {
	lock   *flock.Flock
	status HAStatus
}

// validateHA checks the HA settings.
func (c Config) validateHA() error {
	switch c.HA.Role {
	case "", HARoleLive, HARoleBackup:
	default:
		return cfgErr("ha.role", fmt.Sprintf("%q: want live or backup", c.HA.Role), nil)
	}
	if l := c.HA.Lock; l != "" && (l != filepath.Base(l) || l == "." || l == ".." || strings.ContainsAny(l, `/\`)) {
		return cfgErr("ha.lock", fmt.Sprintf("%q is not a plain file name in the data directory", l), nil)
	}
	if c.HA.Role == "" && c.HA.Lock != "" {
		return cfgErr("ha.lock", "set without ha.role", nil)
	}
	return nil
}

// acquireHA takes the lock of a node of a pair before anything in its data
// directory is opened: at once for a live (ErrHALocked if it is held), by
// waiting until ctx ends for a backup. It returns nil for a standalone
// node.
func acquireHA(ctx context.Context, cfg Config) (*haHold, error) {
	cfg = cfg.withDefaults()
	if cfg.HA.Role == "" {
		return nil, nil
	}
	if err := cfg.validateHA(); err != nil {
		return nil, err
	}
	if err := privateDir(cfg.DataDir); err != nil {
		return nil, err
	}
	name := cfg.HA.Lock
	if name == "" {
		name = defaultHALock
	}
	path := filepath.Join(cfg.DataDir, name)
	lock := flock.New(path, flock.SetPermissions(0o600))
	log := cfg.Logger.With(slog.String("component", "ha"), slog.String("role", string(cfg.HA.Role)), slog.String("lock", path))
	var ok bool
	var err error
	if cfg.HA.Role == HARoleLive {
		ok, err = lock.TryLock()
		if err == nil && !ok {
			err = fmt.Errorf("open %s as live: %w", path, ErrHALocked)
		}
	} else {
		log.Info("backup waiting for the lock")
		ok, err = lock.TryLockContext(ctx, haPoll)
	}
	if err != nil || !ok {
		if err == nil {
			err = ErrHALocked
		}
		lock.Close()
		return nil, fmt.Errorf("ha lock %s: %w", path, err)
	}
	log.Info("ha lock taken; opening the store")
	return &haHold{lock: lock, status: HAStatus{Role: cfg.HA.Role, Since: time.Now(), Lock: path}}, nil
}

// release drops the lock, once the store is closed.
func (h *haHold) release() error {
	if h == nil {
		return nil
	}
	return h.lock.Close()
}

// haIn is the lock Open took, for the fx graph; empty for an fx
// application that assembles Module itself, which cannot wait on a lock
// before the store opens and so cannot run a pair.
type haIn struct {
	fx.In
	Hold *haHold `optional:"true"`
}

// checkHA refuses a pair's configuration without the lock.
func checkHA(cfg Config, in haIn) error {
	if cfg.HA.Role != "" && in.Hold == nil {
		return cfgErr("ha.role", "a live/backup pair needs petrel.Open, which takes the lock before the store opens", nil)
	}
	return nil
}

// HA returns the node's part in a live/backup pair, and whether it is
// one.
func (n *Node) HA() (HAStatus, bool) {
	if n.ha == nil {
		return HAStatus{}, false
	}
	return n.ha.status, true
}

var (
	descHARole = prometheus.NewDesc("petrel_ha_role",
		"1 for the role this node of a live/backup pair serves in (live or backup); absent for a standalone node.", []string{"role"}, nil)
	descHASince = prometheus.NewDesc("petrel_ha_since_seconds",
		"Unix time at which this node of a pair took the lock and opened the store: for a backup, when it took over.", nil, nil)
)

// haCollector exports HAStatus.
type haCollector struct{ h *haHold }

func (c haCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descHARole
	ch <- descHASince
}

func (c haCollector) Collect(ch chan<- prometheus.Metric) {
	if c.h == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(descHARole, prometheus.GaugeValue, 1, string(c.h.status.Role))
	ch <- prometheus.MustNewConstMetric(descHASince, prometheus.GaugeValue, float64(c.h.status.Since.UnixNano())/1e9)
}

// openHA runs Open's body with the lock held: it takes the lock, lets
// reload (if not nil) give the Config as it is now, lets open build the
// node with it, and drops the lock again if either fails.
func openHA(ctx context.Context, cfg Config, reload func(Config) (Config, error), open func(Config, *haHold) (*Node, error)) (*Node, error) {
	if err := cfg.validateHA(); err != nil {
		return nil, fmt.Errorf("open node: %w", err)
	}
	hold, err := acquireHA(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open node: %w", err)
	}
	if reload != nil {
		next, err := reload(cfg)
		if err == nil && (next.DataDir != cfg.DataDir || next.HA != cfg.HA) {
			// The lock held is the one of cfg's directory and role.
			err = errors.New("the reloaded configuration changes node.data_dir or ha, which the lock was taken for")
		}
		if err != nil {
			hold.release()
			return nil, fmt.Errorf("open node: reload configuration: %w", err)
		}
		cfg = next
	}
	n, err := open(cfg, hold)
	if err != nil {
		hold.release()
		return nil, err
	}
	return n, nil
}
