package apiserver

import (
	"context"
	"fmt"
	"net/http"

	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/apiserver/ui"
)

// dashboard serves the page (package ui) beside the API, and sends a
// browser that opens the bare address to it.
func dashboard(mux *http.ServeMux) {
	mux.Handle("GET "+ui.Prefix, ui.Handler())
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, ui.Prefix, http.StatusFound)
	})
}

// readOnly refuses every request that could change something: the page's
// own listener (ListenUI) serves a browser, which reads.
func readOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writeErrorStatus(w, http.StatusMethodNotAllowed, fmt.Errorf("%s %s: the dashboard's address only reads; use the API's", r.Method, r.URL.Path))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// ListenUI serves the dashboard and the API's reads, nothing that changes
// anything, on addr, a loopback host:port: for a daemon whose API is a unix
// socket, which a browser cannot open.
func ListenUI(ctx context.Context, addr string, cfg Config) (*Server, error) {
	if api.IsUnix(addr) {
		return nil, fmt.Errorf("--ui %q: want a loopback host:port such as 127.0.0.1:8031", addr)
	}
	cfg.Addr, cfg.readOnly = addr, true
	cfg.Block = nil
	return Listen(ctx, cfg)
}
