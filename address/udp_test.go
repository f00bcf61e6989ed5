package address

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/petrelmq/petrel/message"
)

// These tests use real UDP sockets on this machine, with a short period and
// real time, so they wait for events with a deadline instead of a fake
// clock.

// waitHeard waits until dir knows node name, or fails after a deadline that
// only a broken transport reaches.
func waitHeard(t *testing.T, dir *Directory, name string) Entry {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for {
		changed := dir.Changed()
		if e, ok := dir.Lookup(name); ok {
			return e
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("%s not heard within 10s", name)
		}
	}
}

// TestBroadcastLoopback: two listeners, as two nodes on one host, bind the
// same port and both hear one announcer broadcasting to 127.255.255.255.
func TestBroadcastLoopback(t *testing.T) {
	cfg := DiscoveryConfig{Group: "127.255.255.255:0", Period: 50 * time.Millisecond, Timeout: time.Second, Logger: quiet}
	dir1, dir2 := NewDirectory(), NewDirectory()
	l1 := startUDPListener(t, cfg, message.NodeID{1}, dir1)
	port := l1.Addr().(*net.UDPAddr).Port
	cfg.Group = netip.AddrPortFrom(netip.MustParseAddr("127.255.255.255"), uint16(port)).String()
	l2 := startUDPListener(t, cfg, message.NodeID{2}, dir2)

	an, err := NewAnnouncer(cfg, AnnouncementFor("plant-7", plantID, mustConnectors(t, "tcp://127.0.0.1:7400")))
	if err != nil {
		t.Fatal(err)
	}
	if err := an.Start(); err != nil {
		t.Fatal(err)
	}
	defer an.Stop()

	for _, dir := range []*Directory{dir1, dir2} {
		if e := waitHeard(t, dir, "plant-7"); e.ID != plantID || e.Connectors.String() != "tcp://127.0.0.1:7400" {
			t.Fatalf("heard %v", entryString(e))
		}
	}
	for i, l := range []*Listener{l1, l2} {
		if s := l.Stats(); s.Accepted == 0 || s.Malformed+s.BadMAC+s.Unusable != 0 {
			t.Errorf("listener %d: %+v", i+1, s)
		}
	}
}

// TestMulticastLoopback does the same with a multicast group joined on the
// loopback interface, which needs no route: Interface makes the listeners
// join there and the announcer send there (IP_MULTICAST_IF).
func TestMulticastLoopback(t *testing.T) {
	lo := loopbackInterface(t)
	cfg := DiscoveryConfig{Group: "239.255.74.1:0", Interface: lo, Period: 50 * time.Millisecond, Timeout: time.Second, Logger: quiet}
	dir1, dir2 := NewDirectory(), NewDirectory()
	l1, err := NewListener(cfg, message.NodeID{1}, dir1)
	if err != nil {
		t.Fatal(err)
	}
	if err := l1.Start(); err != nil {
		t.Skipf("cannot join a multicast group on %s here: %v", lo, err)
	}
	defer l1.Stop()
	cfg.Group = netip.AddrPortFrom(netip.MustParseAddr("239.255.74.1"), uint16(l1.Addr().(*net.UDPAddr).Port)).String()
	startUDPListener(t, cfg, message.NodeID{2}, dir2)

	an, err := NewAnnouncer(cfg, AnnouncementFor("plant-7", plantID, mustConnectors(t, "tcp://127.0.0.1:7400")))
	if err != nil {
		t.Fatal(err)
	}
	if err := an.Start(); err != nil {
		t.Fatal(err)
	}
	defer an.Stop()
	waitHeard(t, dir1, "plant-7")
	waitHeard(t, dir2, "plant-7")
}

// loopbackInterface returns the name of the loopback interface ("lo" on
// Linux, "lo0" on macOS).
func loopbackInterface(t *testing.T) string {
	ifs, err := net.Interfaces()
	if err != nil {
		t.Skip(err)
	}
	for _, ifi := range ifs {
		if ifi.Flags&net.FlagLoopback != 0 && ifi.Flags&net.FlagUp != 0 {
			return ifi.Name
		}
	}
	t.Skip("no loopback interface is up")
	return ""
}

func startUDPListener(t *testing.T, cfg DiscoveryConfig, self message.NodeID, dir *Directory) *Listener {
	t.Helper()
	l, err := NewListener(cfg, self, dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Stop)
	return l
}
