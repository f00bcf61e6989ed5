package filetransfer

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// ErrOutsideRoot is returned by Within when a path does not lie strictly
// inside the root it must stay in: it climbs out with "..", is the root
// itself, or is elsewhere altogether.
var ErrOutsideRoot = errors.New("path outside its root")

// Properties a node keeps on a file message for itself. A receiver clears
// them from what a peer announces, and a sender strips them from what it
// announces: they mean something only on the node that set them.
const (
	// PropSourceModTime is the application property, Unix nanoseconds, in
	// which the origin keeps its file's modification time when the file was
	// described: the sender checks the file against it while it sends.
	PropSourceModTime = "petrel.source-mtime"
	// PropHandedBy is the application property in which a node records the
	// identity of the peer that handed it a file (the name it proved in the
	// handshake). What the node then does on the file's behalf, its notice,
	// is judged by the access rules as that peer.
	PropHandedBy = "petrel.handed-by"
)

// Within returns path cleaned, once it is sure the cleaned path lies
// strictly inside root (cleaned too): never root itself, never out of it
// through "..". Both must be absolute or both relative to the same
// directory. Otherwise it returns an error wrapping ErrOutsideRoot.
//
// It judges names, not the filesystem: a symbolic link inside root is
// followed by whoever opens the path. The folders it guards (the spool,
// its held copies) hold only what the node itself created.
func Within(root, path string) (string, error) {
	root, clean := filepath.Clean(root), filepath.Clean(path)
	rel, err := filepath.Rel(root, clean)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return "", fmt.Errorf("%q is not inside %q: %w", path, root, ErrOutsideRoot)
	}
	return clean, nil
}
