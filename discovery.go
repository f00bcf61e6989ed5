package petrel

import (
	"fmt"
	"net"

	"github.com/petrelmq/petrel/address"
)

// startDiscovery starts the listener that feeds the directory and, when
// the node accepts links, the announcer of this node. Discovered nodes
// become neighbours: nextHop resolves them to themselves.
func (n *Node) startDiscovery(d DiscoveryConfig, secret string) error {
	if !d.Enabled {
		return nil
	}
	dc := address.DiscoveryConfig{
		Group: d.Group, Interface: d.Interface, Period: d.Period, Timeout: d.Timeout,
		MaxNodes: d.MaxNodes, Now: n.cfg.Store.Now, Logger: n.cfg.Logger,
	}
	if secret != "" {
		dc.Secret = []byte(secret)
	}
	l, err := address.NewListener(dc, n.id, n.dir)
	if err != nil {
		return fmt.Errorf("discovery: %w", err)
	}
	if err := l.Start(); err != nil {
		return fmt.Errorf("discovery: %w", err)
	}
	n.discoveryListener = l
	addr, err := n.advertised(d)
	if err != nil || addr == "" {
		return err
	}
	cs, err := address.ParseConnectors(addr)
	if err != nil {
		return fmt.Errorf("discovery: advertise: %w", err)
	}
	an, err := address.NewAnnouncer(dc, address.AnnouncementFor(n.cfg.Name, n.id, cs))
	if err != nil {
		return fmt.Errorf("discovery: %w", err)
	}
	if err := an.Start(); err != nil {
		return fmt.Errorf("discovery: %w", err)
	}
	n.announcer = an
	return nil
}

// advertised is the connector this node announces: the configured one, or
// tcp:// (tls:// when the listener speaks TLS) and the listen address; ""
// when the node accepts no links.
func (n *Node) advertised(d DiscoveryConfig) (string, error) {
	if a := d.Advertise; a != "" {
		return a, nil
	}
	la := n.ListenAddr()
	if la == "" {
		return "", nil
	}
	host, _, err := net.SplitHostPort(la)
	if err != nil {
		return "", err
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return "", fmt.Errorf("discovery: listening on %s, which is every interface: set discovery.advertise to the address other nodes reach this one by", la)
	}
	if n.cfg.TLS.Listening() {
		return "tls://" + la, nil
	}
	return "tcp://" + la, nil
}

func (n *Node) stopDiscovery() {
	if n.announcer != nil {
		n.announcer.Stop()
		n.announcer = nil
	}
	if n.discoveryListener != nil {
		n.discoveryListener.Stop()
		n.discoveryListener = nil
	}
}

// DiscoveryStats count discovery's packets since it (re)started.
type DiscoveryStats struct {
	Enabled   bool   `json:"enabled"`
	Sent      uint64 `json:"sent"`
	Received  uint64 `json:"received"`
	Accepted  uint64 `json:"accepted"`
	Malformed uint64 `json:"malformed"`
	BadMAC    uint64 `json:"bad_mac"`
	Own       uint64 `json:"own"`
	Unusable  uint64 `json:"unusable"`
	// Stale counts announcements refused as not newer than the last one
	// heard from their node: replays, or a node whose clock went back.
	Stale uint64 `json:"stale"`
}

func (n *Node) discoveryStats() DiscoveryStats {
	n.reconfMu.Lock()
	defer n.reconfMu.Unlock()
	var st DiscoveryStats
	if l := n.discoveryListener; l != nil {
		ls := l.Stats()
		st = DiscoveryStats{Enabled: true, Received: ls.Received, Accepted: ls.Accepted, Malformed: ls.Malformed,
			BadMAC: ls.BadMAC, Own: ls.Own, Unusable: ls.Unusable, Stale: ls.Stale}
	}
	if a := n.announcer; a != nil {
		st.Sent = a.Stats().Sent
	}
	return st
}

// Directory returns the nodes this node knows: static and discovered.
func (n *Node) Directory() []address.Entry { return n.dir.Entries() }
