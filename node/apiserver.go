package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/e31network/e31/node/api"
)

// apiServer is the local HTTP API.
type apiServer struct {
	srv  *http.Server
	ln   net.Listener
	addr string
}

// serveAPI listens on the configured API address. A TCP address must be on
// loopback: the API can submit jobs and spend the node's key, so it is never
// reachable from the network.
func (n *Node) serveAPI(ctx context.Context) (*apiServer, error) {
	addr := n.cfg.API
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
			_ = os.Chmod(path, 0o600)
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
		return nil, fmt.Errorf("listen for the API on %s: %w", n.cfg.API, err)
	}
	mux := http.NewServeMux()
	n.routes(mux)
	s := &apiServer{
		srv: &http.Server{
			Handler:           mux,
			ReadHeaderTimeout: 10 * time.Second,
			BaseContext:       func(net.Listener) context.Context { return ctx },
		},
		ln:   ln,
		addr: addr,
	}
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.log.Error("api server", "err", err)
		}
	}()
	return s, nil
}

func (s *apiServer) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
}

// handler adapts a function returning (value, error) to an HTTP handler that
// writes JSON, mapping errors to statuses.
func handler(fn func(r *http.Request) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		out, err := fn(r)
		w.Header().Set("Content-Type", "application/json")
		if err != nil {
			code := http.StatusInternalServerError
			var he *httpError
			switch {
			case errors.As(err, &he):
				code = he.code
			case errors.Is(err, errNotFound):
				code = http.StatusNotFound
			}
			w.WriteHeader(code)
			_ = json.NewEncoder(w).Encode(api.Error{Error: err.Error()})
			return
		}
		_ = json.NewEncoder(w).Encode(out)
	}
}

// httpError carries a status code with a user-facing message.
type httpError struct {
	code int
	err  error
}

func (e *httpError) Error() string { return e.err.Error() }
func (e *httpError) Unwrap() error { return e.err }

func badRequest(err error) error { return &httpError{code: http.StatusBadRequest, err: err} }

func (n *Node) routes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/id", handler(func(r *http.Request) (any, error) { return n.apiID(), nil }))
	mux.HandleFunc("GET /v1/peers", handler(func(r *http.Request) (any, error) { return n.apiPeers(), nil }))
	mux.HandleFunc("GET /v1/nodes", handler(func(r *http.Request) (any, error) { return n.apiNodes(), nil }))
	n.jobRoutes(mux)
}

func (n *Node) apiGPUs() []api.GPU {
	out := []api.GPU{}
	for _, g := range n.ownOffer().GPUs {
		out = append(out, api.GPU{Index: g.Index, UUID: g.UUID, Model: g.Model, MemoryBytes: g.MemoryBytes, Free: g.Free})
	}
	return out
}

func (n *Node) apiID() api.ID {
	return api.ID{
		PeerID:  n.self.String(),
		Network: n.cfg.Network,
		Addrs:   n.Addrs(),
		GPUs:    n.apiGPUs(),
		Runtime: n.runtimeName(),
		Started: n.started.UTC(),
		Version: Version,
	}
}

func (n *Node) apiPeers() []api.Peer {
	out := []api.Peer{}
	for _, p := range n.host.Network().Peers() {
		ap := api.Peer{PeerID: p.String()}
		for _, c := range n.host.Network().ConnsToPeer(p) {
			ap.Addrs = append(ap.Addrs, c.RemoteMultiaddr().String())
		}
		out = append(out, ap)
	}
	slices.SortFunc(out, func(a, b api.Peer) int { return strings.Compare(a.PeerID, b.PeerID) })
	return out
}

func (n *Node) apiNodes() []api.Node {
	out := []api.Node{}
	for _, e := range n.offers.snapshot() {
		an := api.Node{
			PeerID:      e.offer.Provider,
			GPUs:        []api.GPU{},
			CPUs:        e.offer.CPUs,
			MemoryBytes: e.offer.MemoryBytes,
			LastSeen:    e.lastSeen.UTC(),
			SignedAt:    time.UnixMilli(e.signedAt).UTC(),
			Self:        e.offer.Provider == n.self.String(),
		}
		for _, g := range e.offer.GPUs {
			an.GPUs = append(an.GPUs, api.GPU{Index: g.Index, UUID: g.UUID, Model: g.Model, MemoryBytes: g.MemoryBytes, Free: g.Free})
		}
		out = append(out, an)
	}
	return out
}

func (n *Node) runtimeName() string {
	if n.runner == nil {
		return ""
	}
	return n.runner.Runtime()
}
