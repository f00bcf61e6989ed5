//go:build !(linux || darwin || dragonfly || freebsd || netbsd || openbsd)

package address

import (
	"errors"
	"net/netip"
	"runtime"
	"syscall"
)

// controlReuse sets nothing here: only one node per host can listen for
// broadcast discovery.
func controlReuse(_, _ string, _ syscall.RawConn) error { return nil }

// controlSender refuses broadcast, whose SO_BROADCAST this build does not
// set; multicast needs no option (the system picks the interface).
func controlSender(multicast bool, _ netip.Addr) func(_, _ string, c syscall.RawConn) error {
	return func(_, _ string, _ syscall.RawConn) error {
		if !multicast {
			return errors.New("broadcast discovery is not supported on " + runtime.GOOS + "; use a multicast group such as 239.255.74.1:7401")
		}
		return nil
	}
}
