package metrics

import (
	"context"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Serve serves /metrics on addr until the returned stop is called, and Go's
// profiles under /debug/pprof/ where addr is a loopback address
// (Profiled).
func (m *Registry) Serve(addr string) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return m.serveOn(ln), nil
}

// serveOn is Serve on a listener of the caller's.
func (m *Registry) serveOn(ln net.Listener) (stop func()) {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}))
	if Profiled(ln.Addr()) {
		// Where a daemon's CPU and memory go under load (go tool pprof
		// http://ADDR/debug/pprof/profile).
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Serve returns ErrServerClosed on Shutdown; any other error means
		// the listener broke and the endpoint is gone, which stop cannot
		// undo.
		srv.Serve(ln) //nolint:errcheck
	}()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(ctx) //nolint:errcheck // closes the listener; nothing to report
		<-done
	}
}

// Profiled says whether Serve serves profiles on addr: only on a loopback
// address. A profile shows the daemon's command line, its memory (what it
// holds of jobs and keys) and its code; metrics are counts, fine for a
// Prometheus on another machine to scrape, profiles are for the operator
// at the machine.
func Profiled(addr net.Addr) bool {
	tcp, ok := addr.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}
