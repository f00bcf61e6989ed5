package petrel

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"

	"github.com/petrelmq/petrel/address"
	"github.com/petrelmq/petrel/message"
)

// ErrConfig is wrapped by every *ConfigError.
var ErrConfig = errors.New("invalid node configuration")

// ConfigError is one problem in a Config. Field is the path of the field
// as the YAML file spells it ("routes[1].via"), so that conf can point at
// its line.
type ConfigError struct {
	Field  string
	Reason string
	Err    error // the package sentinel, if any
}

func (e *ConfigError) Error() string { return e.Field + ": " + e.Reason }

// Unwrap returns ErrConfig and the package sentinel.
func (e *ConfigError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrConfig, e.Err}
	}
	return []error{ErrConfig}
}

func cfgErr(field, reason string, err error) *ConfigError {
	return &ConfigError{Field: field, Reason: reason, Err: err}
}

// Validate checks the configuration on its own and as a whole: names,
// connectors, that every route goes through a known neighbour and every
// send address can be reached. It returns the first problem, a
// *ConfigError. Open calls it; so does conf, to report the line.
func (c Config) Validate() error {
	c = c.withDefaults()
	if err := message.ValidName(c.Name); err != nil {
		return cfgErr("node.name", err.Error(), err)
	}
	if c.Listen != "" {
		if _, _, err := net.SplitHostPort(c.Listen); err != nil {
			return cfgErr("listen", fmt.Sprintf("%q is not host:port: %v", c.Listen, err), nil)
		}
	}
	if c.Admin.Listen != "" {
		if err := validHostPort(c.Admin.Listen); err != nil {
			return cfgErr("admin.listen", fmt.Sprintf("%q is not host:port: %v", c.Admin.Listen, err), nil)
		}
	}
	if err := c.Admin.validate(); err != nil {
		return err
	}
	if err := c.validateHA(); err != nil {
		return err
	}
	neighbours, err := c.validateNodes()
	if err != nil {
		return err
	}
	routed, err := c.validateRoutes(neighbours)
	if err != nil {
		return err
	}
	if err := c.validateAddresses(neighbours, routed); err != nil {
		return err
	}
	if err := c.validateTopics(); err != nil {
		return err
	}
	if err := c.validateMQTT(); err != nil {
		return err
	}
	if err := c.TLS.validate(); err != nil {
		return err
	}
	if err := validateAccess(c.Access); err != nil {
		return err
	}
	if err := c.validatePeers(); err != nil {
		return err
	}
	return c.validateFiles()
}

// validateFiles checks the file settings and the outboxes.
func (c Config) validateFiles() error {
	f := c.Files
	maxFrame := c.Link.MaxFrame
	if maxFrame == 0 {
		maxFrame = 16 << 20
	}
	switch {
	case f.ChunkSize < 0 || f.ChunkSize > maxFrame-8:
		return cfgErr("files.chunk_size", fmt.Sprintf("%d bytes: must be between 1 and link.max_frame - 8 (%d)", f.ChunkSize, maxFrame-8), nil)
	case f.Window < 0 || f.Window > 1<<16:
		return cfgErr("files.window", fmt.Sprintf("%d chunks: must be between 1 and 65536", f.Window), nil)
	case f.Concurrency < 0 || f.Concurrency > 256:
		return cfgErr("files.concurrency", fmt.Sprintf("%d: must be between 1 and 256", f.Concurrency), nil)
	case f.SyncBytes < 0:
		return cfgErr("files.sync_bytes", "must not be negative", nil)
	}
	dirs := map[string]bool{}
	for i, o := range c.Outboxes {
		field := "outboxes[" + strconv.Itoa(i) + "]"
		if o.Dir == "" {
			return cfgErr(field+".dir", "an outbox needs a folder", nil)
		}
		// The node watches the folder by its absolute path: "ob", "ob/"
		// and "/abs/ob" are one folder, and two outboxes on it would
		// each send every file.
		dir, err := filepath.Abs(o.Dir)
		if err != nil {
			return cfgErr(field+".dir", err.Error(), err)
		}
		if dirs[dir] {
			return cfgErr(field+".dir", fmt.Sprintf("%q is watched by another outbox already", o.Dir), nil)
		}
		dirs[dir] = true
		if _, _, err := message.ParseDestination(o.To); err != nil {
			return cfgErr(field+".to", err.Error(), err)
		}
		if o.After != "" && o.After != "sent" && o.After != "delete" {
			return cfgErr(field+".after", fmt.Sprintf("%q: want sent or delete", o.After), nil)
		}
		if o.Quiet < 0 {
			return cfgErr(field+".quiet", "must not be negative", nil)
		}
	}
	return nil
}

func (c Config) validateNodes() (map[string]bool, error) {
	seen := map[string]bool{}
	for i, n := range c.Nodes {
		f := fmt.Sprintf("nodes[%d]", i)
		if err := message.ValidName(n.Name); err != nil {
			return nil, cfgErr(f+".name", err.Error(), err)
		}
		if n.Name == c.Name {
			return nil, cfgErr(f+".name", fmt.Sprintf("%q is this node itself", n.Name), nil)
		}
		if seen[n.Name] {
			return nil, cfgErr(f+".name", fmt.Sprintf("node %q is listed twice", n.Name), nil)
		}
		seen[n.Name] = true
		if _, err := address.ParseConnectors(n.Connector); err != nil {
			return nil, cfgErr(f+".connector", err.Error(), err)
		}
	}
	return seen, nil
}

func (c Config) validateRoutes(neighbours map[string]bool) (map[string]bool, error) {
	routed := map[string]bool{}
	for i, r := range c.Routes {
		f := fmt.Sprintf("routes[%d]", i)
		if err := message.ValidName(r.Node); err != nil {
			return nil, cfgErr(f+".node", err.Error(), err)
		}
		if r.Node == c.Name {
			return nil, cfgErr(f+".node", fmt.Sprintf("%q is this node: it needs no route", r.Node), nil)
		}
		if routed[r.Node] {
			return nil, cfgErr(f+".node", fmt.Sprintf("node %q has two routes", r.Node), nil)
		}
		if !neighbours[r.Via] {
			return nil, cfgErr(f+".via", fmt.Sprintf("route to %q goes through %q, which is not in nodes: add it to nodes with its connector", r.Node, r.Via), nil)
		}
		routed[r.Node] = true
	}
	return routed, nil
}

func (c Config) validateAddresses(neighbours, routed map[string]bool) error {
	seen := map[string]bool{}
	for i, a := range c.Addresses {
		f := fmt.Sprintf("addresses[%d]", i)
		if err := message.ValidName(a.Name); err != nil {
			return cfgErr(f+".name", err.Error(), err)
		}
		if seen[a.Name] {
			return cfgErr(f+".name", fmt.Sprintf("address %q is declared twice", a.Name), nil)
		}
		seen[a.Name] = true
		switch a.Role {
		case address.RoleSend:
			if a.Node == "" {
				return cfgErr(f+".node", fmt.Sprintf("send address %q needs the node that hosts it", a.Name), nil)
			}
			if err := message.ValidName(a.Node); err != nil {
				return cfgErr(f+".node", err.Error(), err)
			}
			if a.Node == c.Name {
				return cfgErr(f+".node", fmt.Sprintf("send address %q is hosted by this node: make it a receive address", a.Name), nil)
			}
			if !neighbours[a.Node] && !routed[a.Node] {
				return cfgErr(f+".node", fmt.Sprintf("send address %q goes to node %q, which has no route: add %q to nodes or routes", a.Name, a.Node, a.Node), nil)
			}
		case 0, address.RoleReceive, address.RoleRelay:
			if a.Node != "" && a.Node != c.Name {
				return cfgErr(f+".node", fmt.Sprintf("only send addresses name a node; %q is a %s address", a.Name, roleOrReceive(a.Role)), nil)
			}
		default:
			return cfgErr(f+".role", fmt.Sprintf("unknown role %d", a.Role), address.ErrRole)
		}
	}
	return nil
}

func roleOrReceive(r address.Role) address.Role {
	if r == 0 {
		return address.RoleReceive
	}
	return r
}

// validHostPort checks host:port with a numeric port from 0 to 65535.
func validHostPort(s string) error {
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		return err
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("port %q is not a number from 0 to 65535", port)
	}
	return nil
}
