// Package apiserver serves the daemon's local HTTP+JSON API, the one the e31
// command uses. It maps domain errors to HTTP statuses here, at the edge,
// and nowhere else: the parts of the node return typed errors. A panic in
// a request answers that request 500 and is logged and counted
// (Config.Panicked); the server goes on.
//
// No web page may drive it (guard.go): a request from another origin is
// refused, one that may change something must be JSON, and on TCP every
// request needs the token (Access), or to read, the dashboard's cookie.
// Over the unix socket the daemon knows its caller's uid, and touches a
// local path for a caller only where that caller could (paths.go).
package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/content/image"
	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/submitter"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"
)

// What the API serves, each from the part of the node that owns it.
type (
	// Network describes this node and what it sees of the network.
	Network interface {
		ID() api.ID
		Peers() []api.Peer
		Nodes() []api.Node
		Matches() []api.Match
	}
	// LostNodes is a Network that also remembers the providers that left
	// its view for missed heartbeats, for GET /v1/nodes?lost=1; a Network
	// without it lists none.
	LostNodes interface {
		LostNodes() []api.Node
	}
	// Jobs are this node's jobs (submitter.Submitter).
	Jobs interface {
		Submit(ctx context.Context, req api.SubmitRequest, p content.Progress) (api.Job, error)
		Jobs() []api.Job
		Attempts() []api.Job
		Job(id string) (api.Job, error)
		WaitJob(ctx context.Context, id string, seen uint64) (api.Job, error)
		Withdraw(ctx context.Context, id string) (api.Job, error)
		Output(id string, checkpoint bool, attempt int) (string, cid.Cid, error)
		FullID(id string) string
		// LedgerJobs is every job ID the ledger holds leases of the job
		// under: each attempt and task (submitter.Submitter.LedgerJobs).
		LedgerJobs(id string) (api.JobIDs, error)
	}
	// Content writes DAGs out of the local store (content.Store).
	Content interface {
		Export(ctx context.Context, root cid.Cid, dest string, o content.ExportOptions) error
		Size(ctx context.Context, root cid.Cid) (int64, error)
	}
	// Images are the images imported into the store (images.Library).
	Images interface {
		Import(ctx context.Context, ref string, p content.Progress) (image.Record, error)
		List(ctx context.Context) ([]image.Record, error)
		Remove(ctx context.Context, root cid.Cid) error
	}
	// Drainer is the provider's drain (provider.Provider): its owner takes
	// the machine back.
	Drainer interface {
		Drain(mode api.DrainMode, deadline time.Time) (api.Drain, error)
		Undrain() api.Drain
		DrainStatus() api.Drain
	}
	// Ledger is this node's receipts (ledger.Ledger).
	Ledger interface {
		ByJob(ctx context.Context, job string) ([]ledger.Entry, error)
		All(ctx context.Context) ([]ledger.Entry, error)
		Verify(ctx context.Context) (ledger.VerifyReport, error)
		Usage(ctx context.Context, f ledger.UsageFilter, p ledger.Policy) (ledger.UsageReport, error)
		HeldByJobs(ctx context.Context, p ledger.Policy, jobs ...string) (ledger.JobHeld, error)
		Export(ctx context.Context, w io.Writer, f ledger.ExportFilter) (int, error)
	}
)

// Config is what the server serves.
type Config struct {
	// Addr is a unix socket path (optionally "unix:"-prefixed) or a
	// loopback host:port.
	Addr    string
	Network Network
	Jobs    Jobs
	Content Content
	// GetLimits caps what one e31 get writes out (node.Config.MaxOutputBytes,
	// MaxEntries, MaxDepth).
	GetLimits content.Limits
	Images    Images
	Ledger    Ledger
	// Drainer, when set, serves GET and POST /v1/drain and POST
	// /v1/undrain.
	Drainer Drainer
	// Market, when set, serves GET /v1/market: every shard's latest
	// digest.
	Market func() api.Market
	// Logs, when set, serves GET /v1/jobs/{id}/logs.
	Logs Logs
	// Leases, when set, serves GET /v1/leases: the leases this node
	// provides.
	Leases Leases
	// Block, when set, serves POST /v1/debug/block: cut this node off from
	// the peers named (an empty list heals). Off in a default daemon.
	Block func(peers []peer.ID)
	// PutCAR, when set, serves POST /v1/debug/car: store the posted CAR's
	// blocks as they are and pin its roots, complete or not. Set only by a
	// daemon playing a hostile submitter for tests (node.Config.RawContent),
	// and served only by a build with the byzantine tag.
	PutCAR func(ctx context.Context, car io.Reader) ([]cid.Cid, error)
	// Doctor, when set, serves GET /v1/doctor: the daemon's checks of its
	// machine (e31d doctor), with its own configuration. Never on the
	// dashboard's port: a check runs a probe container.
	Doctor func(ctx context.Context) api.DoctorReport
	Log    *slog.Logger
	// Panicked, if set, is told of every panic recovered from a request
	// (where PanicAPI); the node counts them. Each is also logged.
	Panicked func(where string)
	// Access, which Listen needs for a TCP address, asks every request
	// over TCP for the token, or to read, the dashboard's cookie; it makes
	// the dashboard's one-time links. Nil in Handler: nothing is asked.
	Access *Access
	// Dashboard is the address ("http://HOST:PORT") of the dashboard's
	// own listener (ListenUI), where POST /v1/ui/link leads; empty: the
	// API's own, where that is TCP.
	Dashboard string

	// readOnly serves only GET and HEAD (ListenUI).
	readOnly bool
	// peerCred learns who connected to the unix socket; nil: the kernel
	// says (SO_PEERCRED). Tests play other users with it.
	peerCred PeerCred
}

// Server is the running API.
type Server struct {
	cfg  Config
	srv  *http.Server
	addr string
	// unix: served on the unix socket, where no token is asked and the
	// caller's uid is known.
	unix bool
	// cookie is the name of the dashboard's cookie on this listener.
	cookie string
	cop    *http.CrossOriginProtection
}

// maxRequestBody caps what a client may post.
const maxRequestBody = 1 << 20

// Listen starts serving. A TCP address must be on loopback: the API can
// submit jobs and spend the node's key, so it is never reachable from the
// network; and it needs cfg.Access, since any local process, and any web
// page the user visits, can connect to a loopback port. Requests'
// contexts end with ctx.
func Listen(ctx context.Context, cfg Config) (*Server, error) {
	addr := cfg.Addr
	var ln net.Listener
	var err error
	unix := api.IsUnix(addr)
	if unix {
		path := strings.TrimPrefix(addr, "unix:")
		ln, err = listenUnix(path)
		addr = path
	} else {
		if cfg.Access == nil {
			return nil, fmt.Errorf("--api %q: a TCP API needs a token (Config.Access)", addr)
		}
		host, _, serr := net.SplitHostPort(addr)
		if serr != nil {
			return nil, fmt.Errorf("--api %q: %w", addr, serr)
		}
		ip := net.ParseIP(host)
		if host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return nil, fmt.Errorf("--api %q: the API must listen on loopback or a unix socket", addr)
		}
		ln, err = net.Listen("tcp", addr)
		if err == nil {
			addr = ln.Addr().String()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("listen for the API on %s: %w", cfg.Addr, err)
	}
	s := newServer(cfg, addr, unix)
	h := s.handler()
	if !unix {
		h = loopbackHost(h)
	}
	s.srv = &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		// A client's idle keep-alive connection holds a goroutine and its
		// buffers; one that polled and went away is let go.
		IdleTimeout: 30 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx },
	}
	if unix {
		cred := cfg.peerCred
		if cred == nil {
			cred = kernelPeerCred
		}
		s.srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context { return withCaller(ctx, c, cred) }
	}
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			cfg.Log.Error("api server", "err", err)
		}
	}()
	return s, nil
}

// Handler serves the API of cfg (cfg.Addr unused) without listening: for
// tests, and for a caller that serves it on a listener of its own. It
// refuses what web pages of other origins send and bodies that are not
// JSON, as Listen's do; it asks for the token only where cfg.Access is
// set.
func Handler(cfg Config) http.Handler {
	return newServer(cfg, "", false).handler()
}

func newServer(cfg Config, addr string, unix bool) *Server {
	s := &Server{cfg: cfg, addr: addr, unix: unix, cop: http.NewCrossOriginProtection(), cookie: cookiePrefix + "api"}
	if _, port, err := net.SplitHostPort(addr); err == nil && !unix {
		s.cookie = cookiePrefix + port
	}
	return s
}

func (s *Server) handler() http.Handler {
	mux := http.NewServeMux()
	s.routes(mux)
	dashboard(mux)
	mux.HandleFunc("GET "+loginPath, s.login)
	var h http.Handler = mux
	if s.cfg.readOnly {
		h = readOnly(h)
	}
	return recovering(s.guard(h), s.cfg.Log, s.cfg.Panicked)
}

// listenUnix listens on a unix socket at path that no other user can
// connect to, at any instant: it is made in a directory of its own, 0700,
// beside path, made 0600 there, then renamed into place. (Listening at
// path and chmodding it after leaves it, for a moment, as open as the
// umask lets it be; a umask changed for the daemon's socket would change
// it for every file the daemon's other goroutines make meanwhile.) A
// socket left at path by a crash is replaced: nothing else can be
// listening there, because the data dir is the daemon's alone.
func listenUnix(path string) (net.Listener, error) {
	// Short names: a socket's path has at most 107 bytes, and the one
	// made apart is this much longer than path's folder.
	dir, err := os.MkdirTemp(filepath.Dir(path), ".a")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	tmp := filepath.Join(dir, "s")
	ln, err := net.Listen("unix", tmp)
	if err != nil {
		return nil, err
	}
	// The socket leaves tmp: Shutdown removes it where it ends up.
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	err = os.Chmod(tmp, 0o600)
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// PanicAPI is the where of a panic recovered from an API request
// (Config.Panicked).
const PanicAPI = "api"

// recovering answers a request whose handler panicked with 500, logs the
// panic with its stack and tells panicked. net/http would recover it too,
// but only print it, uncounted, and leave the client with a dropped
// connection. A panic after the response began cannot become a 500: the
// response is aborted instead (http.ErrAbortHandler), so that the client
// sees a broken reply, not a short one that looks whole.
func recovering(h http.Handler, log *slog.Logger, panicked func(where string)) http.Handler {
	if log == nil {
		log = slog.Default()
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rw := &responseStarted{ResponseWriter: w}
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v) // a handler's own way to abort: not a bug
			}
			log.Error("panic recovered", "where", PanicAPI, "panic", fmt.Sprint(v), "method", r.Method, "path", r.URL.Path, "stack", string(debug.Stack()))
			if panicked != nil {
				panicked(PanicAPI)
			}
			if rw.started {
				panic(http.ErrAbortHandler)
			}
			writeErrorStatus(w, http.StatusInternalServerError, errors.New("internal error"))
		}()
		h.ServeHTTP(rw, r)
	})
}

// responseStarted notes whether a response has begun. It flushes as the
// writer it wraps does, since submit, image import and logs stream.
type responseStarted struct {
	http.ResponseWriter
	started bool
}

func (w *responseStarted) WriteHeader(code int) {
	// An informational (1xx) header is not the response.
	if code >= 200 {
		w.started = true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *responseStarted) Write(b []byte) (int, error) {
	w.started = true
	return w.ResponseWriter.Write(b)
}

func (w *responseStarted) Flush() {
	w.started = true
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *responseStarted) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Addr is where the server listens.
func (s *Server) Addr() string { return s.addr }

// Shutdown stops the server, waiting for requests in flight until ctx
// ends, and removes its unix socket.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if s.unix {
		if rerr := os.Remove(s.addr); rerr != nil && !errors.Is(rerr, os.ErrNotExist) && err == nil {
			err = rerr
		}
	}
	return err
}

// status maps an error to the HTTP status it answers with.
func status(err error) int {
	switch {
	case errors.Is(err, submitter.ErrNotFound), errors.Is(err, image.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, submitter.ErrInvalid), errors.As(err, new(*requestError)),
		errors.Is(err, image.ErrBadRef), errors.Is(err, image.ErrInvalid), errors.Is(err, image.ErrNoPlatform),
		errors.Is(err, image.ErrAmbiguous), errors.Is(err, image.ErrDigestMismatch), errors.Is(err, os.ErrNotExist):
		return http.StatusBadRequest
	case errors.Is(err, submitter.ErrConflict):
		return http.StatusConflict
	case errors.Is(err, context.Canceled):
		// A request's context ends with the daemon's stop (or with the
		// client, who reads no answer): the client asks again later.
		return http.StatusServiceUnavailable
	case errors.Is(err, ErrNoDoctor), errors.Is(err, ErrNoDashboard), errors.Is(err, ErrNoLeases), errors.Is(err, ErrNoRecords):
		return http.StatusNotImplemented
	case errors.Is(err, ErrUnauthorized):
		return http.StatusUnauthorized
	case errors.Is(err, ErrForbidden):
		return http.StatusForbidden
	case errors.Is(err, ErrContentType):
		return http.StatusUnsupportedMediaType
	}
	return http.StatusInternalServerError
}

// errStopping is what a log cut by the daemon's stop says.
var errStopping = errors.New("the daemon is stopping")

// ErrNoDoctor answers GET /v1/doctor on a server given no Doctor.
var ErrNoDoctor = errors.New("this daemon does not check its machine over the API: run e31d doctor")

// requestError is a request the server itself cannot read.
type requestError struct{ err error }

func (e *requestError) Error() string { return e.err.Error() }
func (e *requestError) Unwrap() error { return e.err }

func badRequest(err error) error { return &requestError{err} }

// writeError writes err as JSON with its status.
func writeError(w http.ResponseWriter, err error) { writeErrorStatus(w, status(err), err) }

func writeErrorStatus(w http.ResponseWriter, code int, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(api.Error{Error: err.Error()})
}

// handler adapts a function returning (value, error) to an HTTP handler that
// writes JSON.
func handler(fn func(r *http.Request) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		out, err := fn(r)
		if err != nil {
			writeError(w, err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	}
}

// decode reads a JSON request body strictly.
func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, maxRequestBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badRequest(err)
	}
	return nil
}

// loopbackHost refuses a request whose Host header names anything but a
// loopback address. A web page the user visits can make the browser send
// requests to 127.0.0.1 under a name its owner controls (DNS rebinding);
// this API submits jobs and spends the node's key, and the dashboard shows
// what runs here, so only requests addressed to the loopback are served.
func loopbackHost(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if name, _, err := net.SplitHostPort(host); err == nil {
			host = name
		}
		host = strings.Trim(host, "[]")
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			http.Error(w, fmt.Sprintf("Host %q is not a loopback address: this API answers only requests addressed to 127.0.0.1, ::1 or localhost", r.Host), http.StatusMisdirectedRequest)
			return
		}
		h.ServeHTTP(w, r)
	})
}
