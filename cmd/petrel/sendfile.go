package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	petrel "github.com/petrelmq/petrel"
	"github.com/petrelmq/petrel/message"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
)

func newSendfileCmd() *cobra.Command {
	var server, cfgPath, dataDir, tokenFile, notify, name string
	var priority int
	var ttl time.Duration
	var asJSON, noWait bool
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
destination refused it); interrupting sendfile does not stop the transfer.

With --server host:port the file goes through the node's TCP admin listener,
which sends only files under its admin.file_roots, and asks for the token of
--token-file or $PETREL_ADMIN_TOKEN if it has admin.token_file.`,
		Example: `  petrel sendfile ./report.csv reports@plant-7 -c /etc/petrel/petrel.yaml
  petrel sendfile /data/dump.bin backups@site-b --notify notices --json`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 2 {
				return usageErrorf("want <path> and <address@node>, got %d arguments", len(args))
			}
			if _, _, err := message.ParseDestination(args[1]); err != nil {
				return usageErrorf("destination %q: %v", args[1], err)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if priority < -1 || priority > 9 {
				return usageErrorf("--priority %d: want 0 to 9", priority)
			}
			path, err := filepath.Abs(args[0])
			if err != nil {
				return err
			}
			if fi, err := os.Stat(path); err != nil {
				return fmt.Errorf("sendfile: %w", err)
			} else if !fi.Mode().IsRegular() {
				return fmt.Errorf("sendfile: %s is not a regular file", path)
			}
			c, err := newAdminClient(server, cfgPath, dataDir, tokenFile)
			if err != nil {
				return err
			}
			defer c.close()
			req := petrel.SendFileRequest{Path: path, To: args[1], Filename: name, Notify: notify, TTL: ttl}
			if priority >= 0 {
				p := uint8(priority)
				req.Priority = &p
			}
			ctx := cmd.Context()
			var sent petrel.SendFileResponse
			if err := c.do(ctx, "POST", "/api/files", req, &sent); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if !asJSON {
				fmt.Fprintf(out, "stored %s (%d bytes) as message %d for %s\n", sent.Filename, sent.Size, sent.ID, sent.Destination)
			}
			var final petrel.FileProgress
			if !noWait {
				if final, err = followFile(ctx, c, sent, out, !asJSON); err != nil {
					return err
				}
			}
			if asJSON {
				enc := json.NewEncoder(out)
				return enc.Encode(struct {
					petrel.SendFileResponse
					State string `json:"state,omitempty"`
					Error string `json:"error,omitempty"`
				}{sent, final.State, final.Error})
			}
			if final.State == "failed" {
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
		},
	}
	f := cmd.Flags()
	f.StringVar(&server, "server", "", "the node's admin `address` (host:port); default: the local node's socket")
	f.StringVarP(&cfgPath, "config", "c", "", "the local node's YAML configuration `file`")
	f.StringVar(&dataDir, "data-dir", "", "the local node's data `directory`")
	f.StringVar(&notify, "notify", "", "`address` that gets a notice when the transfer completes or fails")
	f.StringVar(&name, "name", "", "file `name` at the destination (default: the file's own)")
	f.IntVar(&priority, "priority", -1, "message priority, 0 to 9 (default 4)")
	f.DurationVar(&ttl, "ttl", 0, "time to live of the transfer (default: none)")
	f.BoolVar(&asJSON, "json", false, "print one JSON object instead of a progress bar")
	f.BoolVar(&noWait, "no-wait", false, "return once the node stored the file message")
	addTokenFlag(cmd, &tokenFile)
	return cmd
}

// followFile polls the node for the file's progress until the next hop
// holds it or it fails, drawing a progress bar when bar is set.
func followFile(ctx context.Context, c *adminClient, sent petrel.SendFileResponse, out io.Writer, bar bool) (petrel.FileProgress, error) {
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
		var p petrel.FileProgress
		if err := c.do(ctx, "GET", "/api/files/"+strconv.FormatUint(sent.ID, 10), nil, &p); err != nil {
			return p, err
		}
		if pb != nil {
			pb.Set64(p.Acked)
		}
		switch p.State {
		case "handed over", "delivered":
			if pb != nil {
				pb.Finish()
			}
			return p, nil
		case "failed":
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
