package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/petrelmq/petrel/filetransfer"
	"github.com/petrelmq/petrel/internal/adminapi"
	"github.com/petrelmq/petrel/message"
)

// sendfileCmd is `petrel sendfile`: its flags, and the steps of a run.
type sendfileCmd struct {
	server, cfgPath, dataDir, tokenFile, notify, name string
	priority                                          int
	ttl                                               time.Duration
	asJSON, noWait                                    bool
}

func newSendfileCmd() *cobra.Command {
	sc := &sendfileCmd{}
	cmd := &cobra.Command{
		Use:   "sendfile <path> <address@node>",
		Short: "Send a file through a running node, with a progress bar",
		Long: `Send a file through a running node. The node reads the file in place (it must
be readable by the node and must not change until it is sent), describes it
(name, size, SHA-256) and stores its file message durably; from then on the
transfer is the node's, and it resumes by itself after link cuts and
restarts. sendfile then shows the transfer to the next hop: bytes, rate and
time left. It ends when the next hop holds the file (a relay, or the
destination itself), and prints the SHA-256.

Exit status 1 if the transfer fails for good (the file changed, the
destination refused it), or if the node no longer knows the file: it
remembers how files ended only until it stops, so one handed over before
the node restarted is unknown to it. Interrupting sendfile does not stop
the transfer.

With --server host:port the file goes through the node's TCP admin listener,
which sends only files under its admin.file_roots, and asks for the token of
--token-file or $PETREL_ADMIN_TOKEN if it has admin.token_file.`,
		Example: `  petrel sendfile ./report.csv reports@plant-7 -c /etc/petrel/petrel.yaml
  petrel sendfile /data/dump.bin backups@site-b --notify notices --json`,
		Args: sendfileArgs,
		RunE: sc.run,
	}
	sc.flags(cmd)
	return cmd
}

func (sc *sendfileCmd) flags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&sc.server, "server", "", "the node's admin `address` (host:port); default: the local node's socket")
	f.StringVarP(&sc.cfgPath, "config", "c", "", "the local node's YAML configuration `file`")
	f.StringVar(&sc.dataDir, "data-dir", "", "the local node's data `directory`")
	f.StringVar(&sc.notify, "notify", "", "`address` that gets a notice when the transfer completes or fails")
	f.StringVar(&sc.name, "name", "", "file `name` at the destination (default: the file's own)")
	f.IntVar(&sc.priority, "priority", message.DefaultPriority, "message priority, 0 to 9")
	f.DurationVar(&sc.ttl, "ttl", 0, "time to live of the transfer (default: none)")
	f.BoolVar(&sc.asJSON, "json", false, "print one JSON object instead of a progress bar")
	f.BoolVar(&sc.noWait, "no-wait", false, "return once the node stored the file message")
	addTokenFlag(cmd, &sc.tokenFile)
}

func sendfileArgs(_ *cobra.Command, args []string) error {
	if len(args) != 2 {
		return usageErrorf("want <path> and <address@node>, got %d arguments", len(args))
	}
	if _, _, err := message.ParseDestination(args[1]); err != nil {
		return usageErrorf("destination %q: %v", args[1], err)
	}
	return nil
}

// run has the node store the file message, follows the transfer unless
// --no-wait, and reports how it ended.
func (sc *sendfileCmd) run(cmd *cobra.Command, args []string) error {
	req, err := sc.request(args[0], args[1])
	if err != nil {
		return err
	}
	c, err := newAdminClient(sc.server, sc.cfgPath, sc.dataDir, sc.tokenFile, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	defer c.close()
	ctx := cmd.Context()
	var sent adminapi.SendFileResponse
	if err := c.do(ctx, "POST", adminapi.PathFiles, req, &sent); err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if !sc.asJSON {
		fmt.Fprintf(out, "stored %s (%d bytes) as message %d for %s\n", sent.Filename, sent.Size, sent.ID, sent.Destination)
	}
	var final adminapi.FileProgress
	if !sc.noWait {
		if final, err = followFile(ctx, c, sent, out, !sc.asJSON); err != nil {
			return err
		}
	}
	if sc.asJSON {
		return printSentJSON(out, sent, final)
	}
	return printSent(out, sent, final)
}

// request checks the flags and the file, and builds the node's request:
// the node reads the file at its absolute path.
func (sc *sendfileCmd) request(file, to string) (adminapi.SendFileRequest, error) {
	priority, err := priorityFlag(sc.priority)
	if err != nil {
		return adminapi.SendFileRequest{}, err
	}
	if err := ttlFlag(sc.ttl); err != nil {
		return adminapi.SendFileRequest{}, err
	}
	// The node sends the notice only once the file has gone: an address
	// it cannot send to would be found out then, and the notice lost.
	if sc.notify != "" {
		if _, _, err := message.ParseDestination(sc.notify); err != nil {
			return adminapi.SendFileRequest{}, usageErrorf("--notify %q: %v", sc.notify, err)
		}
	}
	path, err := filepath.Abs(file)
	if err != nil {
		return adminapi.SendFileRequest{}, err
	}
	if fi, err := os.Stat(path); err != nil {
		return adminapi.SendFileRequest{}, fmt.Errorf("sendfile: %w", err)
	} else if !fi.Mode().IsRegular() {
		return adminapi.SendFileRequest{}, fmt.Errorf("sendfile: %s is not a regular file", path)
	}
	return adminapi.SendFileRequest{Path: path, To: to, Filename: sc.name, Notify: sc.notify, TTL: sc.ttl, Priority: &priority}, nil
}

// printSentJSON prints the stored file message and, when followed, how
// its transfer ended, as one JSON object; a transfer that failed is the
// command's error all the same, so that a script sees exit status 1 with
// or without --json.
func printSentJSON(out io.Writer, sent adminapi.SendFileResponse, final adminapi.FileProgress) error {
	err := json.NewEncoder(out).Encode(struct {
		adminapi.SendFileResponse
		State filetransfer.State `json:"state,omitempty"`
		Error string             `json:"error,omitempty"`
	}{sent, final.State, final.Error})
	if err == nil && final.State == filetransfer.StateFailed {
		err = fmt.Errorf("transfer of %s failed: %s", sent.Filename, final.Error)
	}
	return err
}

// printSent prints the file's SHA-256 and how its transfer ended; a
// transfer that failed is the command's error.
func printSent(out io.Writer, sent adminapi.SendFileResponse, final adminapi.FileProgress) error {
	if final.State == filetransfer.StateFailed {
		return fmt.Errorf("transfer of %s failed: %s", sent.Filename, final.Error)
	}
	fmt.Fprintf(out, "sha256 %s  %s\n", sent.SHA256, sent.Filename)
	if final.State != "" {
		fmt.Fprintf(out, "%s", final.State)
		if final.NextHop != "" {
			fmt.Fprintf(out, " to %s", final.NextHop)
		}
		fmt.Fprintln(out)
	}
	return nil
}

// followFile polls the node for the file's progress until the next hop
// holds it or it fails, drawing a progress bar when bar is set. It ends
// with an error when the node does not know the file (404): the node
// keeps how files ended in memory only, so after a restart it cannot say,
// and polling on would never end.
func followFile(ctx context.Context, c *adminClient, sent adminapi.SendFileResponse, out io.Writer, bar bool) (adminapi.FileProgress, error) {
	var pb *progressbar.ProgressBar
	if bar {
		pb = progressbar.NewOptions64(sent.Size,
			progressbar.OptionSetWriter(out),
			progressbar.OptionSetDescription(sent.Filename),
			progressbar.OptionShowBytes(true),
			progressbar.OptionShowTotalBytes(true),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionShowElapsedTimeOnFinish(),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionFullWidth(),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(out) }),
		)
	}
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		var p adminapi.FileProgress
		if err := c.do(ctx, "GET", adminapi.FilePath(sent.ID), nil, &p); err != nil {
			if pb != nil {
				fmt.Fprintln(out)
			}
			return p, unknownFile(sent, err)
		}
		if pb != nil {
			pb.Set64(p.Acked)
		}
		switch p.State {
		case filetransfer.StateHandedOver, filetransfer.StateDelivered:
			if pb != nil {
				pb.Finish()
			}
			return p, nil
		case filetransfer.StateFailed:
			if pb != nil {
				fmt.Fprintln(out)
			}
			return p, nil
		}
		select {
		case <-ctx.Done():
			return p, ctx.Err()
		case <-t.C:
		}
	}
}

// unknownFile explains a 404 from GET /api/files/{id} about the file
// followed, and returns any other error as it is.
func unknownFile(sent adminapi.SendFileResponse, err error) error {
	var se *adminapi.StatusError
	if !errors.As(err, &se) || se.Code != http.StatusNotFound {
		return err
	}
	return fmt.Errorf("the node no longer knows file message %d (%s): it may have been handed over, or have failed, "+
		"before the node restarted, since a node remembers how files ended only until it stops; "+
		"look for it at %s, or in the dead letters of its address (petrel dlq list): %w",
		sent.ID, sent.Filename, sent.Destination, err)
}
