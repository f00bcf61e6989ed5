package petrel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/petrelmq/petrel/internal/adminapi"
	"github.com/petrelmq/petrel/internal/authlimit"
	"github.com/petrelmq/petrel/internal/console"
	"github.com/petrelmq/petrel/internal/logkey"
	"github.com/petrelmq/petrel/message"
	"github.com/petrelmq/petrel/queue"
)

// The admin endpoints (internal/adminapi lists them, with their bodies)
// are served on the unix socket in the data directory and, when
// Config.Admin.Listen is set, over TCP. Over TCP every request passes
// adminGuard (admin_guard.go): Host, Origin, the bearer token and the
// Content-Type of POSTs. The unix socket checks only the Content-Type;
// reaching it takes the node's user.

// adminNode is what the admin endpoints need of the node: its operating
// methods, and the two lookups the embedding API does not offer.
type adminNode interface {
	Status() Status
	QueueStats() []QueueStats
	Producer() *Producer
	Sync(ctx context.Context) error
	Purge(ctx context.Context, name string) (int, error)
	DeadLetterQueue(addr string) (string, error)
	// eachDeadLetter reads the dead letters of addr a page at a time,
	// for GET /api/dlq/{addr}.
	eachDeadLetter(ctx context.Context, addr string, limit int, fn func(StoredMessage) error) error
	PurgeDeadLetters(ctx context.Context, addr string) (int, error)
	// unsubscribe deletes a durable subscription, and returns how many
	// messages it held.
	unsubscribe(ctx context.Context, name string) (int, error)
	Replay(ctx context.Context, addr string, count int) (int, error)
	// lookupQueue returns the queue called name, for POST /api/recv.
	lookupQueue(name string) (*queue.Queue, error)
	// fileProgress says where the file message id, sent from the node,
	// stands, and false if the node knows nothing of it.
	fileProgress(ctx context.Context, id uint64) (adminapi.FileProgress, bool, error)
	// topicsResponse lists the topic spaces and subscriptions.
	topicsResponse() adminapi.Topics
	Subscribe(ctx context.Context, pattern string, opts SubscribeOptions) (*Consumer, error)
	// browsePage reads a page of a queue's messages, for GET
	// /api/queues/{queue}/messages and the console.
	browsePage(ctx context.Context, name string, from browseFrom, limit, maxBytes int) (browsedPage, error)
	// consoleSnapshot and replaySelected serve the console and the
	// endpoints it calls (admin_console.go).
	consoleSnapshot() console.Snapshot
	replaySelected(ctx context.Context, addr string, refs []adminapi.MessageRef) (int, error)
	// unready says why a component that started no longer serves (an
	// MQTT or link listener whose socket failed), nil when none: /readyz then
	// answers 503 with it.
	unready() error
}

// adminServer serves the admin endpoints, in the manner of litestream's
// Server: its own handlers, one route table (routes), its own listeners
// and logger, and the node reached only through adminNode.
type adminServer struct {
	node    adminNode
	log     *slog.Logger
	metrics http.Handler // the node's own registry
	// refused counts the requests refused, by reason (admin_guard.go).
	refused *prometheus.CounterVec
	// maxSend bounds the body of POST /api/send: the message's body as
	// base64 (4 bytes per 3), plus its properties.
	maxSend int64
	// ready is set once every component of the node started, cleared when
	// it stops (/readyz).
	ready atomic.Bool
	// socket serves the unix socket; tcp, Config.Admin.Listen (nil when it
	// is empty).
	socket, tcp *adminEndpoint
	// console is the web console of the TCP listener, nil without one;
	// consoleStats counts its event streams (admin_console.go).
	console      *console.Server
	consoleStats *console.Stats
	// limiter counts the wrong tokens per remote address on the TCP
	// listener, for its rate limit of guesses.
	limiter *authlimit.Limiter
	// conns bounds the connections open on the TCP listener
	// (admin_conns.go).
	conns *adminConnLimit
	// leases hold the answers whose messages wait for POST /api/settle
	// (admin_settle.go).
	leases *adminLeases
}

// newAdminServer makes the admin server of n, and registers its counter
// of refusals in reg, whose figures it serves.
func newAdminServer(n adminNode, log *slog.Logger, reg *prometheus.Registry, limits message.Limits) *adminServer {
	maxBody := limits.MaxBody
	if maxBody <= 0 {
		maxBody = message.DefaultLimits().MaxBody
	}
	s := &adminServer{
		node:    n,
		log:     log.With(slog.String(logkey.Component, "admin")),
		metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}),
		refused: newAdminRefused(),
		maxSend: int64(maxBody)/3*4 + 16<<20,
	}
	reg.MustRegister(s.refused)
	s.limiter = newAuthLimiter(reg)
	s.conns = newAdminConnLimit(reg, s.log)
	s.leases = newAdminLeases(reg)
	s.consoleStats = newConsoleStats(reg)
	return s
}

// adminScope is what a request may reach, by the listener it came to.
type adminScope struct {
	// tcp is set on the TCP listener; fileRoots are then the only
	// directories POST /api/files may read.
	tcp       bool
	fileRoots []string
}

// routes is the one table of the admin endpoints.
func (s *adminServer) routes(scope adminScope) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+adminapi.PathHealthz, s.handleHealthz)
	mux.HandleFunc("GET "+adminapi.PathReadyz, s.handleReadyz)
	mux.Handle("GET "+adminapi.PathMetrics, s.metrics)
	mux.HandleFunc("GET "+adminapi.PathStatus, s.handleStatus)
	mux.HandleFunc("GET "+adminapi.PathStatusOld, s.handleStatus)
	mux.HandleFunc("POST "+adminapi.PathSend, s.handleSend)
	mux.HandleFunc("POST "+adminapi.PathRecv, s.handleRecv)
	mux.HandleFunc("GET "+adminapi.PathQueues, s.handleQueues)
	mux.HandleFunc("POST "+adminapi.PathQueuePurge, s.handlePurge)
	mux.HandleFunc("GET "+adminapi.PathQueueBrowse, s.handleBrowse)
	mux.HandleFunc("GET "+adminapi.PathDeadLetters, s.handleDeadLetters)
	mux.HandleFunc("POST "+adminapi.PathReplay, s.handleReplay)
	mux.HandleFunc("POST "+adminapi.PathDLQPurge, s.handlePurgeDeadLetters)
	mux.HandleFunc("POST "+adminapi.PathFiles, s.handleSendFile(scope))
	mux.HandleFunc("GET "+adminapi.PathFile, s.handleFileProgress)
	mux.HandleFunc("GET "+adminapi.PathTopics, s.handleTopics)
	mux.HandleFunc("POST "+adminapi.PathSubscribe, s.handleSubscribe)
	mux.HandleFunc("POST "+adminapi.PathSettle, s.handleSettle)
	mux.HandleFunc("POST "+adminapi.PathUnsubscribe, s.handleUnsubscribe)
	if scope.tcp && s.console != nil {
		mux.Handle("/", s.console.Handler())
	}
	return mux
}

// tcpHandler is the TCP listener's handler, bound at bound: the routes
// behind adminGuard.
func (s *adminServer) tcpHandler(cfg AdminConfig, bound net.Addr) http.Handler {
	g := newAdminGuard(s.routes(adminScope{tcp: true, fileRoots: cfg.FileRoots}), cfg, bound, s.refused)
	g.console, g.limiter = s.console, s.limiter
	return g
}

func (s *adminServer) handleHealthz(w http.ResponseWriter, _ *http.Request) {
	fmt.Fprintln(w, "ok")
}

func (s *adminServer) handleReadyz(w http.ResponseWriter, _ *http.Request) {
	if !s.ready.Load() {
		http.Error(w, "not ready", http.StatusServiceUnavailable)
		return
	}
	if err := s.node.unready(); err != nil {
		http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "ready")
}

func (s *adminServer) handleStatus(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, s.node.Status())
}

// listenSocket serves the admin endpoints over the unix socket in the
// data directory dir. The directory is 0700 and the socket 0600, so only
// the node's user (and root) reach it; it asks no token, and its POST
// /api/files reads any file that user can read.
func (s *adminServer) listenSocket(dir string) error {
	path := adminapi.SocketPath(dir)
	// A socket left by a crashed process would make Listen fail.
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("admin socket: %w", err)
	}
	ln, err := adminapi.ListenSocket(path)
	if err != nil {
		return fmt.Errorf("admin socket: %w", err)
	}
	// The directory already keeps others out; the mode says the same of
	// the socket itself, whatever the umask.
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return fmt.Errorf("admin socket: %w", err)
	}
	s.socket = s.serve(ln, requireJSON(s.routes(adminScope{}), s.refused), "admin socket")
	return nil
}

// listenTCP opens the admin TCP listener, if cfg.Listen is set, and marks
// the node ready: every other component started before it.
func (s *adminServer) listenTCP(cfg AdminConfig) error {
	if cfg.Listen != "" {
		if err := s.startConsole(cfg); err != nil {
			return fmt.Errorf("admin console: %w", err)
		}
		ln, err := net.Listen("tcp", cfg.Listen)
		if err != nil {
			s.console.Close(context.Background())
			return fmt.Errorf("admin listen on %s: %w", cfg.Listen, err)
		}
		s.tcp = s.serve(s.conns.listener(ln), s.tcpHandler(cfg, ln.Addr()), "admin endpoint")
		s.log.Info("admin endpoint listening", slog.String(logkey.Addr, ln.Addr().String()),
			slog.Bool("token", cfg.Token != ""), slog.Int("file_roots", len(cfg.FileRoots)))
	}
	s.ready.Store(true)
	return nil
}

// stopTCP marks the node not ready, so that /readyz on the unix socket
// answers 503 while the rest stops, and closes the TCP listener, within
// ctx: the rest of the node's stop comes after it.
func (s *adminServer) stopTCP(ctx context.Context) {
	s.ready.Store(false)
	if s.console != nil {
		// The event streams never end by themselves: end them first, so
		// that Shutdown finds no request in progress. Close ends their
		// writes too, so that one blocked on a reader that stopped
		// reading does not hold the stop; should one still be running
		// when ctx ends, stop closes its connection.
		if err := s.console.Close(ctx); err != nil {
			s.log.Warn("console event streams still open at stop; closing their connections", slog.Any(logkey.Error, err))
		}
	}
	s.tcp.stop(ctx)
}

// stopSocket closes the unix socket, the last way in, then forgets the
// leases of answers not settled: the store closes after it.
func (s *adminServer) stopSocket(ctx context.Context) {
	s.socket.stop(ctx)
	s.leases.close()
}

// tcpAddr is the TCP listener's address, "" if there is none.
func (s *adminServer) tcpAddr() string {
	if s.tcp == nil {
		return ""
	}
	return s.tcp.ln.Addr().String()
}

// adminEndpoint is one listener of the admin server, and its goroutine.
type adminEndpoint struct {
	ln   net.Listener
	srv  *http.Server
	done chan struct{}
}

// serve serves h on ln until stop; what names the listener in logs. The
// timeouts, and why there are no others, are in admin_conns.go.
func (s *adminServer) serve(ln net.Listener, h http.Handler, what string) *adminEndpoint {
	e := &adminEndpoint{
		ln: ln,
		srv: &http.Server{Handler: bodyDeadline(h), ReadHeaderTimeout: adminHeaderTimeout, IdleTimeout: adminIdleTimeout,
			MaxHeaderBytes: adminMaxHeaderBytes},
		done: make(chan struct{}),
	}
	go func() {
		defer close(e.done)
		if err := e.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Warn(what+" stopped", slog.Any(logkey.Error, err))
		}
	}()
	return e
}

// stop shuts the listener down, letting requests in progress finish until
// ctx ends, then closes their connections, and waits for its goroutine.
// Closing them makes a handler blocked writing to a client that stopped
// reading return, rather than hold the node's stop past its time.
func (e *adminEndpoint) stop(ctx context.Context) {
	if e == nil {
		return
	}
	if err := e.srv.Shutdown(ctx); err != nil {
		e.srv.Close()
	}
	<-e.done
}

// AdminAddr returns the address the admin endpoint listens on, "" if it
// is off (Config.Admin.Listen empty).
func (n *Node) AdminAddr() string { return n.admin.tcpAddr() }

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func writeJSONError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(adminapi.ErrorResponse{Error: msg})
}
