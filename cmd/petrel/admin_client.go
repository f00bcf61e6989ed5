package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	petrel "github.com/petrelmq/petrel"
	"github.com/spf13/cobra"
)

// adminClient talks to a running node's admin endpoints: through the unix
// socket in its data directory, or over TCP to its admin listener.
type adminClient struct {
	http  *http.Client
	base  string
	where string // for error messages
	// token is the bearer token sent over TCP; "" sends none. The socket
	// needs none.
	token string
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
		base := server
		if !strings.Contains(base, "://") {
			base = "http://" + base
		}
		token, err := adminToken(tokenFile)
		if err != nil {
			return nil, err
		}
		return &adminClient{http: &http.Client{}, base: strings.TrimSuffix(base, "/"), where: base, token: token}, nil
	}
	dir := dataDir
	if dir == "" {
		file, err := loadConfig(cfgPath)
		if err != nil {
			return nil, err
		}
		dir = file.NodeConfig().DataDir
	}
	sock := filepath.Join(dir, petrel.AdminSocket)
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}
	return &adminClient{http: &http.Client{Transport: tr}, base: "http://petrel", where: sock}, nil
}

// do sends a request with in as its JSON body (none if nil) and decodes
// the JSON answer into out. An answer with an error status is returned as
// an error with the node's message.
func (c *adminClient) do(ctx context.Context, method, path string, in, out any) error {
	var body bytes.Buffer
	if in != nil {
		if err := json.NewEncoder(&body).Encode(in); err != nil {
			return err
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, &body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("no node answers at %s (is it running?): %w", c.where, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		var e struct {
			Error string `json:"error"`
		}
		if json.NewDecoder(resp.Body).Decode(&e) == nil && e.Error != "" {
			if resp.StatusCode == http.StatusUnauthorized && c.token == "" {
				return fmt.Errorf("node: %s (give the token with --token-file or $%s)", e.Error, tokenEnv)
			}
			return fmt.Errorf("node: %s", e.Error)
		}
		return fmt.Errorf("node answered %s", resp.Status)
	}
	if out == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

func (c *adminClient) close() { c.http.CloseIdleConnections() }
