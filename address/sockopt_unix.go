//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package address

import (
	"fmt"
	"net/netip"
	"syscall"
)

// controlReuse lets every node on the host bind the discovery port, with
// SO_REUSEADDR and, where it is needed, SO_REUSEPORT (soReusePort); each
// socket then gets its own copy of every broadcast datagram.
func controlReuse(_, _ string, c syscall.RawConn) error {
	return setsockopt(c, func(fd int) error {
		if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1); err != nil {
			return fmt.Errorf("set SO_REUSEADDR: %w", err)
		}
		if soReusePort == 0 {
			return nil
		}
		if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, soReusePort, 1); err != nil {
			return fmt.Errorf("set SO_REUSEPORT: %w", err)
		}
		return nil
	})
}

// controlSender returns the Control of an announcer's socket: SO_BROADCAST,
// which the kernel requires before it sends to a broadcast address, and,
// for multicast on a chosen interface, IP_MULTICAST_IF.
func controlSender(multicast bool, ifaddr netip.Addr) func(_, _ string, c syscall.RawConn) error {
	return func(_, _ string, c syscall.RawConn) error {
		return setsockopt(c, func(fd int) error {
			if !multicast {
				if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_BROADCAST, 1); err != nil {
					return fmt.Errorf("set SO_BROADCAST: %w", err)
				}
				return nil
			}
			if ifaddr.IsValid() {
				if err := syscall.SetsockoptInet4Addr(fd, syscall.IPPROTO_IP, syscall.IP_MULTICAST_IF, ifaddr.As4()); err != nil {
					return fmt.Errorf("set IP_MULTICAST_IF %s: %w", ifaddr, err)
				}
			}
			return nil
		})
	}
}

// setsockopt runs f on c's file descriptor and returns the first error.
func setsockopt(c syscall.RawConn, f func(fd int) error) error {
	var ferr error
	if err := c.Control(func(fd uintptr) { ferr = f(int(fd)) }); err != nil {
		return err
	}
	return ferr
}
