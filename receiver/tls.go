package receiver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"

	"github.com/petrelmq/petrel/session"
)

// tlsConn runs the TLS handshake of an accepted connection, bounded by
// the session's handshake timeout and by the server's life, so that a
// peer that connects and says nothing is dropped like one that stalls
// the session handshake. It closes nc if the handshake fails.
//
// When the handshake verified the client's certificate (client_auth
// require_and_verify), the certificate is who the client is: the returned
// check, for session.Config.CheckPeer, refuses a client whose claimed node
// name is not the certificate's Common Name, so that access rules keyed by
// the name hold for the certificate. Otherwise check is nil. cn is the
// verified certificate's Common Name, "" without one: with per-identity
// credentials (session.Config.Credentials) it is the identity, whose
// peers entry then needs no secret.
func (s *Server) tlsConn(ctx context.Context, nc net.Conn) (tc *tls.Conn, check func(session.Peer) error, cn string, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.handshakeTimeout())
	defer cancel()
	tc = tls.Server(nc, s.cfg.TLS)
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = nc.Close()
		return nil, nil, "", fmt.Errorf("TLS handshake with %s: %w", nc.RemoteAddr(), untrusted(err))
	}
	st := tc.ConnectionState()
	if len(st.VerifiedChains) == 0 {
		return tc, nil, "", nil
	}
	cn = st.PeerCertificates[0].Subject.CommonName
	return tc, func(p session.Peer) error {
		if p.Name != cn {
			return fmt.Errorf("%w: client %q presented a certificate for %q; a node's name must be its certificate's Common Name", session.ErrAuth, p.Name, cn)
		}
		return nil
	}, cn, nil
}

// untrusted names, in a handshake error for a client certificate that no
// trusted authority signed, the certificate and its issuer: crypto/tls
// only says the authority is unknown, and the operator has to find which
// node's certificate, from which authority, to fix either side.
func untrusted(err error) error {
	var ua x509.UnknownAuthorityError
	if !errors.As(err, &ua) || ua.Cert == nil {
		return err
	}
	return fmt.Errorf("client certificate %q is issued by %q, an authority this listener does not trust (its CA bundle): %w",
		ua.Cert.Subject.CommonName, ua.Cert.Issuer.CommonName, err)
}
