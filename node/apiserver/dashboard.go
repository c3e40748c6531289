package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/apiserver/ui"
)

// dashboard serves the page (package ui) beside the API, and sends a
// browser that opens the bare address to it. The page itself is served
// with a first snapshot in it: the answers of the reads it would make
// first, so that its first paint shows the network and the jobs, not
// empty tables waiting for a poll.
func dashboard(mux *http.ServeMux) {
	page := loadIndex()
	mux.Handle("GET "+ui.Prefix, ui.Handler())
	mux.HandleFunc("GET "+ui.Prefix+"{$}", func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		for k, v := range page.header {
			h[k] = v
		}
		snap := firstSnapshot(r, mux)
		h.Set("Content-Length", strconv.Itoa(len(page.head)+len(snap)+len(page.tail)))
		w.WriteHeader(http.StatusOK)
		for _, b := range [][]byte{page.head, snap, page.tail} {
			if _, err := w.Write(b); err != nil {
				return
			}
		}
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, ui.Prefix, http.StatusFound)
	})
}

// snapshotElement is where index.html takes the first snapshot: a data
// block, which a browser neither runs nor renders, and which the page
// reads with JSON.parse of its text.
const snapshotElement = `<script id="snapshot" type="application/json">`

// snapshotParts are the reads the page makes on every refresh, under the
// names it reads them by from the snapshot (app.js, firstData).
var snapshotParts = []struct{ name, path string }{
	{"id", "/v1/id"},
	{"nodes", "/v1/nodes?lost=1"},
	{"jobs", "/v1/jobs"},
	{"receipts", "/v1/receipts"},
	{"usage", "/v1/usage"},
	{"leases", "/v1/leases"},
}

// page is index.html as package ui serves it, cut where the snapshot
// goes, with the headers it is served with.
type page struct {
	header     http.Header
	head, tail []byte
}

// loadIndex reads index.html through ui.Handler, so that the page keeps
// the headers (the content security policy above all) that package ui
// gives it.
func loadIndex() page {
	req, err := http.NewRequest(http.MethodGet, ui.Prefix, nil)
	if err != nil {
		panic(err)
	}
	rec := newCapture()
	ui.Handler().ServeHTTP(rec, req)
	body := rec.body.Bytes()
	i := bytes.Index(body, []byte(snapshotElement))
	if rec.code != http.StatusOK || i < 0 || bytes.Count(body, []byte(snapshotElement)) != 1 {
		// The embedded tree is fixed at build time, and the tests read it.
		panic(fmt.Sprintf("ui: index.html (status %d) must hold %s once", rec.code, snapshotElement))
	}
	cut := i + len(snapshotElement)
	h := rec.header.Clone()
	for _, k := range []string{"Content-Length", "Last-Modified", "Accept-Ranges", "ETag"} {
		h.Del(k)
	}
	return page{header: h, head: body[:cut:cut], tail: body[cut:]}
}

// firstSnapshot answers, as one JSON object, the reads the page would make
// first, each served through mux as the page's own request would be. A
// read that fails is left out: a page whose snapshot lacks one it needs
// reads the API before it draws. The JSON is safe inside the data block:
// encoding/json writes <, > and & as \u escapes, so that no text from the
// network (a job's name) can end the element or open another.
func firstSnapshot(r *http.Request, mux *http.ServeMux) []byte {
	parts := make(map[string]json.RawMessage, len(snapshotParts))
	for _, p := range snapshotParts {
		if b, ok := readPart(r, mux, p.path); ok {
			parts[p.name] = b
		}
	}
	b, err := json.Marshal(parts)
	if err != nil {
		return []byte("{}") // not reached: every part is valid JSON
	}
	return b
}

// readPart serves a GET of path through mux, on behalf of r, and returns
// its body when it answered 200 with JSON. A read that panics is left out
// rather than failing the page: the page's own request for it, moments
// later, meets the same panic, which is recovered, logged and counted
// there.
func readPart(r *http.Request, mux *http.ServeMux, path string) (body json.RawMessage, ok bool) {
	defer func() {
		if recover() != nil {
			body, ok = nil, false
		}
	}()
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, path, nil)
	if err != nil {
		return nil, false
	}
	req.Host, req.RemoteAddr = r.Host, r.RemoteAddr
	rec := newCapture()
	mux.ServeHTTP(rec, req)
	b := bytes.TrimSpace(rec.body.Bytes())
	if rec.code != http.StatusOK || !json.Valid(b) {
		return nil, false
	}
	return b, true
}

// capture is a response written to memory.
type capture struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func newCapture() *capture { return &capture{header: http.Header{}} }

func (c *capture) Header() http.Header { return c.header }

func (c *capture) WriteHeader(code int) {
	if c.code == 0 {
		c.code = code
	}
}

func (c *capture) Write(b []byte) (int, error) {
	c.WriteHeader(http.StatusOK)
	return c.body.Write(b)
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
