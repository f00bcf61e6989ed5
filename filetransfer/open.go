package filetransfer

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// openFlags open a file to send without blocking, without side effects
// on a terminal, and without following a symbolic link. open(2) of a
// named pipe with no writer blocks until one comes, for ever if none does;
// with O_NONBLOCK it returns at once, and so does the open of a device
// that would wait for a carrier. O_NOCTTY keeps a terminal from becoming
// the node's controlling one. noFollow (O_NOFOLLOW where the system has
// it) makes the open fail on a symbolic link: whoever may write an
// outbox folder could otherwise put a link there, after the outbox
// found the name complete and before its open, and have the node read
// and send any file it may read, from anywhere. On a regular file
// O_NONBLOCK changes nothing: its reads never wait. (os adds O_CLOEXEC.)
const openFlags = os.O_RDONLY | syscall.O_NONBLOCK | syscall.O_NOCTTY | noFollow

// beforeOpen, when set, runs between openRegular's stat and its open: a
// test puts another kind of file under the path there, as a race would.
var beforeOpen func(path string)

// openRegular opens the file at path for reading, to send it, and refuses
// anything but a regular file (ErrNotRegular, in an *fs.PathError),
// a symbolic link included: the link itself is judged, never what it
// points to. The path is lstat'ed first, so that a device is not even
// opened in the usual case; then the open file itself is checked, because
// the path may have been given another file in between: the open must
// never block, whatever it finds, and never follow a link put there
// meanwhile. Every read of a file to send goes through here, so each
// open of it, however late, is checked the same way.
func openRegular(path string) (*os.File, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "open", Path: path, Err: notRegular(fi.Mode())}
	}
	if beforeOpen != nil {
		beforeOpen(path)
	}
	f, err := os.OpenFile(path, openFlags, 0)
	if err != nil {
		// O_NOFOLLOW's error on a link differs between systems (ELOOP,
		// EMLINK, EFTYPE): say what the file is instead.
		if lfi, lerr := os.Lstat(path); lerr == nil && lfi.Mode()&fs.ModeSymlink != 0 {
			return nil, &fs.PathError{Op: "open", Path: path, Err: notRegular(lfi.Mode())}
		}
		return nil, err
	}
	if fi, err = f.Stat(); err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, &fs.PathError{Op: "open", Path: path, Err: notRegular(fi.Mode())}
	}
	return f, nil
}

// notRegular is the ErrNotRegular error for a file of mode, saying what
// the file is instead: "a named pipe, not a regular file".
func notRegular(mode fs.FileMode) error {
	return fmt.Errorf("%s, %w", fileKind(mode), ErrNotRegular)
}

// fileKind names the type of a file that is not a regular one.
func fileKind(mode fs.FileMode) string {
	switch t := mode.Type(); {
	case t&fs.ModeDir != 0:
		return "a directory"
	case t&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case t&fs.ModeSocket != 0:
		return "a socket"
	case t&fs.ModeCharDevice != 0:
		return "a character device"
	case t&fs.ModeDevice != 0:
		return "a block device"
	case t&fs.ModeSymlink != 0:
		return "a symbolic link"
	default:
		return fmt.Sprintf("a file of type %s", t)
	}
}
