package filetransfer

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"syscall"
)

var (
	// ErrBadName is returned when a file name or a transfer id is not safe to
	// use as one path element: see CheckName and CheckID. Names come from the
	// network, so this is the guard against writing outside the spool or the
	// received-files folder.
	ErrBadName = errors.New("bad file name")
	// ErrBadInfo is returned by Begin when an Info is unusable for another
	// reason than its name: a negative size or a checksum that is not 64
	// lowercase hex digits.
	ErrBadInfo = errors.New("bad file description")
	// ErrOffset is returned by Incoming.Write when the chunk does not start
	// where the transfer stands, and by Source.ReadChunk for an offset out of
	// the file. The message carries both offsets; the sender resumes at
	// Incoming.Offset.
	ErrOffset = errors.New("chunk at the wrong offset")
	// ErrOverrun is returned by Incoming.Write when the chunk would take the
	// file past the size its Info announced. Nothing of it is written.
	ErrOverrun = errors.New("more data than the announced size")
	// ErrIncomplete is returned by Incoming.Complete when fewer bytes than
	// Info.Size were written. Nothing is removed: the transfer resumes at
	// Offset.
	ErrIncomplete = errors.New("transfer incomplete")
	// ErrCorrupt is returned by Incoming.Complete when the SHA-256 of what was
	// received is not the announced one. The partial file and its state have
	// been removed by then (the spool space is freed), and nothing was
	// delivered: the transfer must start again from offset 0.
	ErrCorrupt = errors.New("file corrupt: checksum mismatch")
	// ErrSpoolFull is returned (wrapped with the system's error) when a write,
	// a sync or a delivery fails because the filesystem is full or over
	// quota. Nothing is corrupted and the durable offset has not moved: once
	// space returns, the transfer goes on from Incoming.Offset.
	ErrSpoolFull = errors.New("spool full: no space left on the filesystem")
	// ErrSourceChanged is returned by Describe, OpenSource, Source.Verify,
	// Source.ReadChunk and Hasher.Check when the file being sent is not the
	// one that was described: its size or modification time changed, it was
	// replaced or removed, or its content no longer matches the checksum.
	ErrSourceChanged = errors.New("source file changed")
	// ErrBusy is returned by Spool.Begin and Spool.Discard when the transfer
	// is already open in this process: one Incoming per id at a time.
	ErrBusy = errors.New("transfer already open")
	// ErrClosed is returned by every method of an Incoming after Complete,
	// Abort or Close, and by a Source after Close.
	ErrClosed = errors.New("transfer closed")
	// ErrUnfinished is returned by Follower.ReadChunk when the transfer it
	// follows was closed, aborted or found corrupt before the bytes asked
	// for became durable: they may never come from this Incoming.
	ErrUnfinished = errors.New("transfer ended before those bytes were durable")
	// ErrAborted is returned by Follower.ReadChunk and Follower.Checksum
	// when the transfer they follow was given up for good (Abort): its
	// sender will not send the rest, and a relay forwarding the file tells
	// its own next hop to drop what it got.
	ErrAborted = errors.New("transfer given up by its sender")
	// ErrNotRegular is returned by Describe and its variants and by
	// OpenSource when the file to send is not a regular file: a directory,
	// a named pipe, a socket, a device, or a symbolic link (never
	// followed: the path names the file to send, not another one
	// elsewhere). Its error says which. Only a regular file has a size and
	// content that stay put while they are described and sent; a named pipe
	// would also block the open for as long as it has no writer.
	ErrNotRegular = errors.New("not a regular file")
	// ErrNotInOutbox is returned by Outbox.Done for a path that is not a file
	// directly in the outbox directory.
	ErrNotInOutbox = errors.New("not a file of this outbox")
)

// MaxNameLen is the longest file name accepted, in bytes: the limit of
// almost every filesystem (NAME_MAX).
const MaxNameLen = 255

// maxIDLen leaves room in MaxNameLen for the longest spool suffix
// (".state.tmp").
const maxIDLen = 200

var idPattern = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

// CheckName returns nil when name can be used as is as one path element of
// a received file: not empty, at most MaxNameLen bytes, no '/' or '\\'
// (the second one matters when the folder is shared with Windows), not "."
// or "..", and no NUL or other control character (a newline in a name
// breaks logs and scripts). Otherwise it returns an error wrapping
// ErrBadName that says why.
func CheckName(name string) error {
	why := ""
	switch {
	case name == "":
		why = "it is empty"
	case len(name) > MaxNameLen:
		why = fmt.Sprintf("it is %d bytes long, over %d", len(name), MaxNameLen)
	case name == "." || name == "..":
		why = "it names a directory"
	case strings.ContainsAny(name, `/\`):
		why = "it contains a path separator"
	case strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		why = "it contains a control character"
	default:
		return nil
	}
	return fmt.Errorf("file name %q: %s: %w", name, why, ErrBadName)
}

// CheckID returns nil when id can name a transfer in the spool: 1 to 200
// characters among A-Z, a-z, 0-9, '.', '_' and '-', and not "." or "..".
// Otherwise it returns an error wrapping ErrBadName.
func CheckID(id string) error {
	if len(id) > maxIDLen || !idPattern.MatchString(id) || id == "." || id == ".." {
		return fmt.Errorf("transfer id %q: want 1 to %d characters among A-Z a-z 0-9 . _ -: %w", id, maxIDLen, ErrBadName)
	}
	return nil
}

// isNoSpace reports whether err is the system saying the filesystem is full
// or the quota is used up.
func isNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// ioError wraps err with what was being done, and with ErrSpoolFull when it
// is a full filesystem, so callers can tell "pause and retry later" from
// other failures with errors.Is.
func ioError(what string, err error) error {
	if isNoSpace(err) {
		return fmt.Errorf("%s: %w: %w", what, ErrSpoolFull, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}
