package address

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"time"
)

// Discovery defaults.
const (
	DefaultDiscoveryGroup  = "255.255.255.255:7401"
	DefaultDiscoveryPeriod = 2 * time.Second
)

// ErrDiscoveryConfig is returned by DiscoveryConfig.Validate, NewAnnouncer
// and NewListener when the configuration cannot work: a group that is not
// an IPv4 address and port, a negative period, a timeout not longer than
// the period.
var ErrDiscoveryConfig = errors.New("invalid discovery configuration")

// DiscoveryConfig configures an Announcer and a Listener.
//
// Discovery runs over UDP, IPv4 only. Each node's Announcer sends its
// announcement to the group every Period, and each node's Listener feeds
// what it hears into the Directory, where an entry not heard within the
// Timeout expires. The group decides the transport:
//
//   - Broadcast, any IPv4 address that is not multicast. The announcer sets
//     SO_BROADCAST. Listeners bind 0.0.0.0:port with SO_REUSEADDR (and
//     SO_REUSEPORT on macOS and the BSDs), so every node on a host can
//     listen on the same port, and each gets a copy of every datagram.
//     127.255.255.255:7401 stays on this machine and works on Linux
//     loopback with no set-up: use it for several nodes on one host.
//     255.255.255.255:7401 leaves through the interface of the default
//     route (or Interface's) and is also heard on this host; with neither,
//     every send fails ("network is unreachable"). A subnet broadcast such
//     as 192.168.1.255:7401 reaches that subnet.
//   - Multicast, 224.0.0.0/4 (use 239.0.0.0/8, administratively scoped).
//     Listeners join the group with net.ListenMulticastUDP, which sets
//     SO_REUSEADDR so nodes on one host share the port. Datagrams go out
//     with the system's default TTL, 1 (one link), and loop back to the
//     sender's own host. The
//     interface comes from Interface, else from the routing table: without
//     Interface, a host with neither a default route nor a route for the
//     group (ip route add 239.0.0.0/8 dev lo) cannot join ("no such
//     device"). With Interface "lo", multicast works on Linux loopback with
//     no route, even though lo has no MULTICAST flag.
//
// Interface, when set, names the interface to use. For multicast,
// listeners join there and the announcer sends there (IP_MULTICAST_IF).
// For broadcast, the announcer sends from the interface's IPv4 address,
// which on Linux makes 255.255.255.255 leave through that interface; a
// broadcast listener still hears every interface.
//
// On systems other than Linux, macOS and the BSDs, this package sets no
// socket options: broadcast is refused and only one node per host can
// listen; use multicast there.
type DiscoveryConfig struct {
	// Group is where announcements go, "ip:port": a broadcast address
	// ("255.255.255.255:7401", "127.255.255.255:7401") or an IPv4
	// multicast group ("239.255.74.1:7401"). Empty means
	// DefaultDiscoveryGroup. A Listener given port 0 picks a free port
	// (see Listener.Addr); an Announcer needs a port.
	Group string
	// Interface is the name of the network interface to use ("eth0",
	// "lo"); empty lets the routing table choose. See above.
	Interface string
	// Period is how often a node announces itself and how often, at half
	// of it, a listener expires silent nodes. 0 means
	// DefaultDiscoveryPeriod.
	Period time.Duration
	// Timeout is how long a node stays in the directory without being
	// heard. It must be longer than Period, and should be several periods
	// so that a lost packet or two does not expire a node. 0 means
	// DefaultTimeout.
	Timeout time.Duration
	// Secret, when not empty, signs announcements with HMAC-SHA256; a
	// listener with a secret drops announcements not signed with it.
	Secret []byte
	// MaxNodes bounds the discovered nodes the directory keeps;
	// announcements from further new nodes are dropped and counted
	// (ListenerStats.Full). 0 means DefaultMaxNodes.
	MaxNodes int
	// Now returns the time (LastSeen, expiry). nil means time.Now.
	Now func() time.Time
	// Logger gets lifecycle events and nodes coming and going. nil means
	// slog.Default().
	Logger *slog.Logger
}

// Validate checks c, with its defaults filled in. Errors wrap
// ErrDiscoveryConfig.
func (c DiscoveryConfig) Validate() error {
	_, err := c.resolve()
	return err
}

// discovery is a DiscoveryConfig with its defaults filled in and its group
// parsed.
type discovery struct {
	DiscoveryConfig
	group     netip.AddrPort
	multicast bool
}

func (c DiscoveryConfig) resolve() (discovery, error) {
	if c.Group == "" {
		c.Group = DefaultDiscoveryGroup
	}
	if c.Period == 0 {
		c.Period = DefaultDiscoveryPeriod
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.MaxNodes <= 0 {
		c.MaxNodes = DefaultMaxNodes
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	bad := func(format string, args ...any) (discovery, error) {
		return discovery{}, fmt.Errorf("discovery: "+format+": %w", append(args, ErrDiscoveryConfig)...)
	}
	group, err := netip.ParseAddrPort(c.Group)
	if err != nil || !group.Addr().Unmap().Is4() || group.Addr().Zone() != "" {
		return bad("group %s: want an IPv4 address and a port, such as %s or 239.255.74.1:7401", quote(c.Group), DefaultDiscoveryGroup)
	}
	group = netip.AddrPortFrom(group.Addr().Unmap(), group.Port())
	switch {
	case group.Addr().IsUnspecified():
		return bad("group %s: 0.0.0.0 is not a destination (use 255.255.255.255 to broadcast)", quote(c.Group))
	case c.Period < time.Millisecond:
		return bad("period %v is shorter than 1ms", c.Period)
	case c.Timeout <= c.Period:
		return bad("timeout %v is not longer than the period %v, so nodes would expire between two announcements", c.Timeout, c.Period)
	}
	return discovery{DiscoveryConfig: c, group: group, multicast: group.Addr().IsMulticast()}, nil
}

// packetConn is the part of net.PacketConn that discovery uses; tests give
// a fake network in its place.
type packetConn interface {
	ReadFrom(p []byte) (n int, addr net.Addr, err error)
	WriteTo(p []byte, addr net.Addr) (n int, err error)
	LocalAddr() net.Addr
	Close() error
}

// iface returns the configured interface and its first IPv4 address; nil
// and the zero address when none is configured.
func (d discovery) iface() (*net.Interface, netip.Addr, error) {
	if d.Interface == "" {
		return nil, netip.Addr{}, nil
	}
	ifi, err := net.InterfaceByName(d.Interface)
	if err != nil {
		return nil, netip.Addr{}, fmt.Errorf("discovery interface %s: %w", quote(d.Interface), err)
	}
	addrs, err := ifi.Addrs()
	if err != nil {
		return nil, netip.Addr{}, fmt.Errorf("discovery interface %s: %w", quote(d.Interface), err)
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(ipn.IP); ok && ip.Unmap().Is4() {
				return ifi, ip.Unmap(), nil
			}
		}
	}
	return nil, netip.Addr{}, fmt.Errorf("discovery interface %s has no IPv4 address", quote(d.Interface))
}

// openSender opens the socket an Announcer sends from: an ephemeral port,
// on the interface's address when one is configured.
func (d discovery) openSender(ctx context.Context) (packetConn, error) {
	_, ifaddr, err := d.iface()
	if err != nil {
		return nil, err
	}
	local := "0.0.0.0:0"
	if ifaddr.IsValid() {
		local = netip.AddrPortFrom(ifaddr, 0).String()
	}
	lc := net.ListenConfig{Control: controlSender(d.multicast, ifaddr)}
	conn, err := lc.ListenPacket(ctx, "udp4", local)
	if err != nil {
		return nil, fmt.Errorf("open discovery sender for %s: %w", d.group, err)
	}
	return conn, nil
}

// openListener opens the socket a Listener reads: the multicast group
// joined, or every address at the group's port for broadcast.
func (d discovery) openListener(ctx context.Context) (packetConn, error) {
	if d.multicast {
		ifi, _, err := d.iface()
		if err != nil {
			return nil, err
		}
		conn, err := net.ListenMulticastUDP("udp4", ifi, net.UDPAddrFromAddrPort(d.group))
		if err != nil {
			return nil, fmt.Errorf("join discovery group %s: %w", d.group, err)
		}
		return conn, nil
	}
	lc := net.ListenConfig{Control: controlReuse}
	local := netip.AddrPortFrom(netip.IPv4Unspecified(), d.group.Port()).String()
	conn, err := lc.ListenPacket(ctx, "udp4", local)
	if err != nil {
		return nil, fmt.Errorf("listen for discovery on %s: %w", local, err)
	}
	return conn, nil
}
