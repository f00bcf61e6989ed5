package petrel

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/petrelmq/petrel/message"
)

// identityFile holds the node's unique id, in hex, in the data directory.
const identityFile = "node.id"

// loadIdentity reads the node's unique id, making and saving one at the
// first start. The file is written to a temporary name, synced and renamed,
// so a crash leaves either no id or a whole one.
func loadIdentity(dir string) (message.NodeID, error) {
	path := filepath.Join(dir, identityFile)
	raw, err := os.ReadFile(path)
	if err == nil {
		id, err := message.ParseNodeID(strings.TrimSpace(string(raw)))
		if err != nil {
			return id, fmt.Errorf("read node id from %s: %w (the file is damaged; remove it only if this node's data is to be thrown away)", path, err)
		}
		return id, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return message.NodeID{}, fmt.Errorf("read node id: %w", err)
	}
	id, err := message.NewNodeID()
	if err != nil {
		return id, err
	}
	if err := writeFileAtomic(path, []byte(id.String()+"\n")); err != nil {
		return id, fmt.Errorf("save node id: %w", err)
	}
	return id, nil
}

// writeFileAtomic writes data to path through a synced temporary file and a
// rename, then syncs the directory so the rename itself is durable.
func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
