package adminapi

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
)

// maxSocketAddr is the longest path a unix socket's address holds on
// Linux: sun_path is 108 bytes, the last a NUL.
const maxSocketAddr = 107

// socketAddr returns the address at which to bind or dial the socket at
// path, and what to call once that is done. A path too long for a unix
// socket's address (a data directory deep in a container's volume) is
// reached through a descriptor of its directory, as
// "/proc/self/fd/N/petrel.sock", which Linux resolves to the same file;
// the descriptor is needed only until the bind or the connect returns.
func socketAddr(path string) (string, func(), error) {
	if len(path) <= maxSocketAddr {
		return path, func() {}, nil
	}
	dir, err := os.Open(filepath.Dir(path))
	if err != nil {
		return "", nil, fmt.Errorf("the socket %s is %d bytes long, past the %d a unix socket's address holds, and its directory does not open: %w", path, len(path), maxSocketAddr, err)
	}
	short := fmt.Sprintf("/proc/self/fd/%d/%s", dir.Fd(), filepath.Base(path))
	if len(short) > maxSocketAddr {
		dir.Close()
		return "", nil, fmt.Errorf("the socket name %q is too long for a unix socket's address", filepath.Base(path))
	}
	return short, func() { dir.Close() }, nil
}

// ListenSocket listens on the unix socket at path, however long the path.
// Closing the listener removes the socket by its path.
func ListenSocket(path string) (net.Listener, error) {
	addr, done, err := socketAddr(path)
	if err != nil {
		return nil, err
	}
	defer done()
	ln, err := net.Listen("unix", addr)
	if err != nil {
		return nil, aliasErr(path, addr, err)
	}
	ul := ln.(*net.UnixListener)
	// The listener would unlink its address at close; once the directory's
	// descriptor is closed, "/proc/self/fd/N/..." may name another
	// directory's file. It removes the socket by its real path instead.
	ul.SetUnlinkOnClose(false)
	return &socketListener{UnixListener: ul, path: path}, nil
}

type socketListener struct {
	*net.UnixListener
	path string
}

func (l *socketListener) Close() error {
	err := l.UnixListener.Close()
	if rerr := os.Remove(l.path); rerr != nil && !os.IsNotExist(rerr) && err == nil {
		err = rerr
	}
	return err
}

// DialSocket connects to the unix socket at path, however long the path.
func DialSocket(ctx context.Context, path string) (net.Conn, error) {
	addr, done, err := socketAddr(path)
	if err != nil {
		return nil, err
	}
	defer done()
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", addr)
	if err != nil {
		return nil, aliasErr(path, addr, err)
	}
	return c, nil
}

// aliasErr says, of an error on a socket reached through its directory's
// descriptor, why the alias was used: without /proc mounted it cannot
// work, and the error alone would name a path nobody configured.
func aliasErr(path, addr string, err error) error {
	if addr == path {
		return err
	}
	return fmt.Errorf("the socket %s is %d bytes long, past the %d a unix socket's address holds, and reaching it as %s failed (is /proc mounted?): %w", path, len(path), maxSocketAddr, addr, err)
}
