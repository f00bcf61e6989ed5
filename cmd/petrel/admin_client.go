package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/petrelmq/petrel/conf"
	"github.com/petrelmq/petrel/internal/adminapi"
)

// adminClient talks to a running node's admin endpoints, through the one
// client of internal/adminapi: through the unix socket in its data
// directory, or over TCP to its admin listener. It adds what a user of
// the command line should do when the node asks for a token.
type adminClient struct {
	api *adminapi.Client
	// cfgPath is the configuration file the socket was found with, if
	// any, for the hint when no node answers there.
	cfgPath string
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
// A warning goes to warn when cfgPath has an error (see socketDir).
func newAdminClient(server, cfgPath, dataDir, tokenFile string, warn io.Writer) (*adminClient, error) {
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
		var err error
		if dir, err = socketDir(cfgPath, warn); err != nil {
			return nil, err
		}
	}
	return &adminClient{api: adminapi.Socket(dir), cfgPath: cfgPath}, nil
}

// socketDir returns the data directory, where the admin socket is, of the
// node whose configuration file is cfgPath (the default one if "").
//
// A file with an error (an edit the running node refused, and keeps
// running its last good configuration for) is no reason not to reach
// that node: it is how petrel stat shows why the edit was refused. Only
// node.data_dir is needed, and it changes only with a restart, so it is
// read from the file as YAML, with a warning on warn that the file has an
// error. A file that is not YAML at all, or has no readable data_dir,
// is the error it was.
func socketDir(cfgPath string, warn io.Writer) (string, error) {
	file, err := loadConfig(cfgPath)
	if err == nil {
		return file.NodeConfig().DataDir, nil
	}
	if !errors.Is(err, conf.ErrInvalid) {
		return "", err
	}
	dir, ok := dataDirOf(cfgPath)
	if !ok {
		return "", badInput(fmt.Errorf("%w\n(the file has an error, and its node.data_dir cannot be read either; "+
			"a running node keeps the configuration it last loaded: reach it with --data-dir)", err))
	}
	fmt.Fprintf(warn, "petrel: warning: %v\npetrel: the file has an error: a running node keeps the configuration it last loaded; "+
		"reaching it in the file's node.data_dir, %s\n", err, dir)
	return dir, nil
}

// dataDirOf reads node.data_dir alone from the YAML file at path, the
// default when it is not there; false if the file is not YAML, or the key
// not a string.
func dataDirOf(path string) (string, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", false
	}
	var f struct {
		Node struct {
			DataDir string `yaml:"data_dir"`
		} `yaml:"node"`
	}
	if err := yaml.Unmarshal(data, &f); err != nil {
		return "", false
	}
	if f.Node.DataDir == "" {
		return conf.Default().NodeConfig().DataDir, true
	}
	return f.Node.DataDir, true
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

// tokenHint adds to a refusal for want of a token how to give one, and
// to a socket found with -c where no node answers why that may be.
func (c *adminClient) tokenHint(err error) error {
	var se *adminapi.StatusError
	if errors.As(err, &se) && se.Code == http.StatusUnauthorized && se.Message != "" && !c.api.HasToken() {
		return fmt.Errorf("%w (give the token with --token-file or $%s)", err, tokenEnv)
	}
	var ne *net.OpError
	if c.cfgPath != "" && errors.As(err, &ne) {
		return fmt.Errorf("%w (the socket is in node.data_dir of %s; a node started before that was changed "+
			"uses its old data directory until it restarts: give that one with --data-dir)", err, c.cfgPath)
	}
	return err
}

func (c *adminClient) close() { c.api.Close() }
