package petrel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/petrelmq/petrel/internal/logkey"
)

// The admin endpoints, served on Config.Admin.Listen and on the unix
// socket in the data directory:
//
//	GET /healthz     200 "ok" while the process serves
//	GET /readyz      200 "ready" once the node started; 503 before and while stopping
//	GET /metrics     Prometheus text, from the node's own registry
//	GET /api/status  Status as JSON (also at /status, which ReadStatus uses)
//	POST /api/files  send a file (see adminFiles); GET /api/files/{id} its progress
//
// Over TCP every request passes adminGuard (admin_guard.go): Host, Origin,
// the bearer token and the Content-Type of POSTs. The unix socket checks
// only the Content-Type; reaching it takes the node's user.

// adminServer is one HTTP server of the admin endpoints, and its goroutine.
type adminServer struct {
	ln   net.Listener
	srv  *http.Server
	done chan struct{}
}

// adminScope is what a request may reach, by the server it came to.
type adminScope struct {
	// tcp is set on the TCP listener; fileRoots are then the only
	// directories POST /api/files may read.
	tcp       bool
	fileRoots []string
}

// adminHandler routes the admin endpoints.
func (n *Node) adminHandler(scope adminScope) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !n.ready.Load() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(n.registry, promhttp.HandlerOpts{}))
	status := func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(n.Status())
	}
	mux.HandleFunc("GET /api/status", status)
	mux.HandleFunc("GET /status", status)
	n.adminFiles(mux, scope)
	n.adminAPI(mux)
	return mux
}

// serveAdmin serves h on ln until stop; what names the server in logs.
func (n *Node) serveAdmin(ln net.Listener, h http.Handler, what string) *adminServer {
	a := &adminServer{
		ln:   ln,
		srv:  &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second},
		done: make(chan struct{}),
	}
	go func() {
		defer close(a.done)
		if err := a.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.log.Warn(what+" stopped", slog.Any(logkey.Error, err))
		}
	}()
	return a
}

// stop shuts the server down, letting requests in progress finish until
// ctx ends, and waits for its goroutine.
func (a *adminServer) stop(ctx context.Context) {
	if a == nil {
		return
	}
	a.srv.Shutdown(ctx)
	<-a.done
}

// startAdminHTTP opens the admin TCP listener, if one is configured, and
// marks the node ready: every other component started before it.
func (n *Node) startAdminHTTP(context.Context) error {
	if addr := n.cfg.Admin.Listen; addr != "" {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("admin listen on %s: %w", addr, err)
		}
		adm := n.cfg.Admin
		h := n.adminHandler(adminScope{tcp: true, fileRoots: adm.FileRoots})
		n.adminHTTP = n.serveAdmin(ln, newAdminGuard(h, adm, ln.Addr(), n.adminRefused), "admin endpoint")
		n.log.Info("admin endpoint listening", slog.String("addr", ln.Addr().String()),
			slog.Bool("token", adm.Token != ""), slog.Int("file_roots", len(adm.FileRoots)))
	}
	n.ready.Store(true)
	return nil
}

// stopAdminHTTP marks the node not ready, so that /readyz on the unix
// socket answers 503 while the rest stops, and closes the TCP listener.
func (n *Node) stopAdminHTTP(ctx context.Context) error {
	n.ready.Store(false)
	n.adminHTTP.stop(ctx)
	return nil
}

// AdminAddr returns the address the admin endpoint listens on, "" if it
// is off (Config.Admin.Listen empty).
func (n *Node) AdminAddr() string {
	if n.adminHTTP == nil {
		return ""
	}
	return n.adminHTTP.ln.Addr().String()
}
