package sender

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"time"

	"github.com/petrelmq/petrel/address"
)

// tlsParamServerName is the option of a tls:// connector that names the
// server's certificate when the host of the connector does not:
// tls://10.0.0.9:7400?server_name=hub-1.example.com.
const tlsParamServerName = "server_name"

// tlsFor returns the TLS configuration for dialing cn: the pool's, with
// the server name to verify set from the connector. A connector option
// this package does not know is refused rather than ignored, since it
// was meant to change how the peer is trusted.
func (p *Pool) tlsFor(cn address.Connector) (*tls.Config, error) {
	for k := range cn.Params {
		if k != tlsParamServerName {
			return nil, fmt.Errorf("tls connector option %q is not known (known: %s; the certificates are set in the tls section)", k, tlsParamServerName)
		}
	}
	var c *tls.Config
	if p.tls != nil {
		c = p.tls.Clone()
	} else {
		c = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if name, ok := cn.Params[tlsParamServerName]; ok {
		c.ServerName = name
	}
	if c.ServerName == "" {
		host, _, err := net.SplitHostPort(cn.Addr)
		if err != nil {
			return nil, err
		}
		c.ServerName = host
	}
	return c, nil
}

// tlsHandshake runs the client side of TLS over nc within timeout, so that
// a server that accepts and then says nothing does not hold the sender.
// It closes nc if the handshake fails.
func tlsHandshake(ctx context.Context, nc net.Conn, c *tls.Config, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tc := tls.Client(nc, c)
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = nc.Close()
		return nil, fmt.Errorf("TLS handshake with %s: %w", nc.RemoteAddr(), err)
	}
	return tc, nil
}
