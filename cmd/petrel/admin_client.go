package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/petrelmq/petrel/internal/adminapi"
	"github.com/spf13/cobra"
)

// adminClient talks to a running node's admin endpoints, through the one
// client of internal/adminapi: through the unix socket in its data
// directory, or over TCP to its admin listener. It adds what a user of
// the command line should do when the node asks for a token.
type adminClient struct {
	api *adminapi.Client
}

// tokenEnv names the environment variable that holds the admin token when
// --token-file is not given.
const tokenEnv = "PETREL_ADMIN_TOKEN"

// addTokenFlag declares --token-file on a command that talks to a node.
func addTokenFlag(cmd *cobra.Command, p *string) {
	cmd.Flags().StringVar(p, "token-file", "", "`file` holding the bearer token of the node's admin listener (admin.token_file), for --server; default: $"+tokenEnv)
}

// adminToken returns the token in tokenFile, its first line, else that of
// $PETREL_ADMIN_TOKEN, else "".
func adminToken(tokenFile string) (string, error) {
	if tokenFile == "" {
		return strings.TrimSpace(os.Getenv(tokenEnv)), nil
	}
	data, err := os.ReadFile(tokenFile)
	if err != nil {
		return "", fmt.Errorf("read the admin token: %w", err)
	}
	token := strings.TrimRight(string(data), "\r\n")
	if token == "" {
		return "", fmt.Errorf("read the admin token: %s is empty", tokenFile)
	}
	return token, nil
}

// newAdminClient reaches the node at server ("host:port" or
// "http://host:port" of its admin listener) or, when server is empty,
// through the socket of the node whose configuration file is cfgPath or
// whose data directory is dataDir (the default data directory if neither).
func newAdminClient(server, cfgPath, dataDir, tokenFile string) (*adminClient, error) {
	set := 0
	for _, s := range []string{server, cfgPath, dataDir} {
		if s != "" {
			set++
		}
	}
	if set > 1 {
		return nil, usageErrorf("give one of --server, -c and --data-dir")
	}
	if server != "" {
		if err := checkServer(server); err != nil {
			return nil, err
		}
		token, err := adminToken(tokenFile)
		if err != nil {
			return nil, err
		}
		return &adminClient{api: adminapi.Dial(server, token)}, nil
	}
	dir := dataDir
	if dir == "" {
		file, err := loadConfig(cfgPath)
		if err != nil {
			return nil, err
		}
		dir = file.NodeConfig().DataDir
	}
	return &adminClient{api: adminapi.Socket(dir)}, nil
}

// checkServer refuses, as a usage error, a --server that names no admin
// listener: the request would fail with a message about the network
// ("no node answers ... unsupported protocol scheme") for what is a typo.
func checkServer(server string) error {
	base := server
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	u, err := url.Parse(base)
	switch {
	case err != nil:
		return usageErrorf("--server %q: %v", server, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return usageErrorf("--server %q: scheme %q; give host:port, http://host:port or https://host:port", server, u.Scheme)
	case u.Host == "" || u.Hostname() == "":
		return usageErrorf("--server %q: no host; give host:port", server)
	case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		return usageErrorf("--server %q: give the listener, host:port (or a proxy's URL), without a query, fragment or user", server)
	}
	return nil
}

// do sends a request with in as its JSON body (none if nil) and decodes
// the JSON answer into out (adminapi.Client.Do). An answer with an error
// status is returned as an error with the node's message.
func (c *adminClient) do(ctx context.Context, method, path string, in, out any) error {
	return c.tokenHint(c.api.Do(ctx, method, path, in, out))
}

// stream sends a request as do does and returns the body of its answer,
// to read as it comes and then close (adminapi.Client.Stream).
func (c *adminClient) stream(ctx context.Context, method, path string, in any) (io.ReadCloser, error) {
	body, err := c.api.Stream(ctx, method, path, in)
	return body, c.tokenHint(err)
}

// tokenHint adds to a refusal for want of a token how to give one.
func (c *adminClient) tokenHint(err error) error {
	var se *adminapi.StatusError
	if errors.As(err, &se) && se.Code == http.StatusUnauthorized && se.Message != "" && !c.api.HasToken() {
		return fmt.Errorf("%w (give the token with --token-file or $%s)", err, tokenEnv)
	}
	return err
}

func (c *adminClient) close() { c.api.Close() }
