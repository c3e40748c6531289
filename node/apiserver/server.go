// Package apiserver serves the daemon's local HTTP+JSON API, the one the e31
// command uses. It maps domain errors to HTTP statuses here, at the edge,
// and nowhere else: the parts of the node return typed errors. A panic in
// a request answers that request 500 and is logged and counted
// (Config.Panicked); the server goes on.
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
	// Logs, when set, serves GET /v1/jobs/{id}/logs.
	Logs Logs
	// Block, when set, serves POST /v1/debug/block: cut this node off from
	// the peers named (an empty list heals). Off in a default daemon.
	Block func(peers []peer.ID)
	// PutCAR, when set, serves POST /v1/debug/car: store the posted CAR's
	// blocks as they are and pin its roots, complete or not. Set only by a
	// daemon playing a hostile submitter for tests (node.Config.RawContent).
	PutCAR func(ctx context.Context, car io.Reader) ([]cid.Cid, error)
	// Doctor, when set, serves GET /v1/doctor: the daemon's checks of its
	// machine (e31d doctor), with its own configuration. Never on the
	// dashboard's port: a check runs a probe container.
	Doctor func(ctx context.Context) api.DoctorReport
	Log    *slog.Logger
	// Panicked, if set, is told of every panic recovered from a request
	// (where PanicAPI); the node counts them. Each is also logged.
	Panicked func(where string)

	// readOnly serves only GET and HEAD (ListenUI).
	readOnly bool
}

// Server is the running API.
type Server struct {
	cfg  Config
	srv  *http.Server
	addr string
}

// maxRequestBody caps what a client may post.
const maxRequestBody = 1 << 20

// Listen starts serving. A TCP address must be on loopback: the API can
// submit jobs and spend the node's key, so it is never reachable from the
// network. Requests' contexts end with ctx.
func Listen(ctx context.Context, cfg Config) (*Server, error) {
	addr := cfg.Addr
	var ln net.Listener
	var err error
	if api.IsUnix(addr) {
		path := addr
		if len(path) > 5 && path[:5] == "unix:" {
			path = path[5:]
		}
		// A socket left by a crash would make Listen fail; nothing else
		// can be listening on it because the data dir is ours alone.
		_ = os.Remove(path)
		ln, err = net.Listen("unix", path)
		if err == nil {
			err = os.Chmod(path, 0o600)
		}
		addr = path
	} else {
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
	s := &Server{cfg: cfg, addr: addr}
	h := s.handler()
	if !api.IsUnix(cfg.Addr) {
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
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			cfg.Log.Error("api server", "err", err)
		}
	}()
	return s, nil
}

// Handler serves the API of cfg (cfg.Addr unused) without listening: for
// tests, and for a caller that serves it on a listener of its own.
func Handler(cfg Config) http.Handler {
	s := &Server{cfg: cfg}
	return s.handler()
}

func (s *Server) handler() http.Handler {
	mux := http.NewServeMux()
	s.routes(mux)
	dashboard(mux)
	var h http.Handler = mux
	if s.cfg.readOnly {
		h = readOnly(h)
	}
	return recovering(h, s.cfg.Log, s.cfg.Panicked)
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

// Shutdown stops the server, waiting for requests in flight until ctx ends.
func (s *Server) Shutdown(ctx context.Context) error { return s.srv.Shutdown(ctx) }

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
	case errors.Is(err, ErrNoDoctor):
		return http.StatusNotImplemented
	}
	return http.StatusInternalServerError
}

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
