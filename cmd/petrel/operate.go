package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"strings"
	"time"

	"github.com/petrelmq/petrel/message"
	"github.com/spf13/cobra"
)

// The commands that operate a running node through its admin API (see
// internal/adminapi): send, recv, queues, purge and dlq. Each takes
// the node's address the same way, with nodeFlags.

// nodeFlags say which node a command talks to, and how it prints.
type nodeFlags struct {
	server, cfgPath, dataDir, tokenFile string
	asJSON                              bool
}

// add declares the flags on cmd; jsonHelp says what --json prints.
func (f *nodeFlags) add(cmd *cobra.Command, jsonHelp string) {
	fs := cmd.Flags()
	fs.StringVar(&f.server, "server", "", "the node's admin `address` (host:port or http://host:port); default: the local node's socket")
	fs.StringVarP(&f.cfgPath, "config", "c", "", "the local node's YAML configuration `file`")
	fs.StringVar(&f.dataDir, "data-dir", "", "the local node's data `directory`")
	addTokenFlag(cmd, &f.tokenFile)
	fs.BoolVar(&f.asJSON, "json", false, jsonHelp)
}

// call makes one request to the node, giving up after timeout.
func (f *nodeFlags) call(ctx context.Context, timeout time.Duration, method, path string, in, out any) error {
	c, err := newAdminClient(f.server, f.cfgPath, f.dataDir, f.tokenFile, os.Stderr)
	if err != nil {
		return err
	}
	defer c.close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return c.do(ctx, method, path, in, out)
}

// callTimeout bounds a request that does not wait on purpose.
const callTimeout = 30 * time.Second

// nodeTargetHelp ends the Long help of every command of this family.
const nodeTargetHelp = `
The command talks to the node's admin API: by default through the admin
socket (petrel.sock) in the local node's data directory, found with -c (the
node's configuration file; one with an error, such as an edit the node
refused, is read for its node.data_dir alone, with a warning) or
--data-dir, else the default petrel-data; or,
with --server host:port, over TCP to the node's admin listener (admin.listen
in its configuration), sending the bearer token of --token-file or
$PETREL_ADMIN_TOKEN when the listener asks for one (admin.token_file).

Exit status: 0 on success; 1 when the node cannot be reached or refuses the
request (the error says why); 2 for a bad command line.`

// oneAddress checks that a command got exactly one argument, a valid
// address or queue name.
func oneAddress(what string) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if len(args) != 1 {
			return usageErrorf("%q wants one %s, got %d arguments", c.CommandPath(), what, len(args))
		}
		// A subscription's queue is sub:<name>; see the README's Topics.
		if _, _, err := message.ParseDestination(strings.TrimPrefix(args[0], "sub:")); err != nil {
			return usageErrorf("%s %q: %v", what, args[0], err)
		}
		return nil
	}
}

// writeJSONLine writes v as one line of JSON.
func writeJSONLine(w io.Writer, v any) error {
	return json.NewEncoder(w).Encode(v)
}
