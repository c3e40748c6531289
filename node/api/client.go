package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// ErrNoDaemon means nothing answered at the API address.
var ErrNoDaemon = errors.New("no e31d answers")

// Client talks to one daemon's local API.
type Client struct {
	addr string
	http *http.Client
	base string
	// token is sent as a bearer token on a TCP address; empty: none.
	token string
}

// ClientOption sets up a Client (NewClient).
type ClientOption func(*Client)

// WithToken makes the client send token ("Authorization: Bearer"), which a
// daemon asks of every request to a TCP API (TokenFile). It is never sent
// over a unix socket, which needs none.
func WithToken(token string) ClientOption {
	return func(c *Client) { c.token = token }
}

// IsUnix reports whether an API address names a unix socket (a path) rather
// than a TCP host:port.
func IsUnix(addr string) bool {
	return strings.HasPrefix(addr, "unix:") || strings.ContainsRune(addr, '/')
}

// NewClient returns a client for addr: a unix socket path (optionally
// prefixed "unix:") or a TCP host:port. Without options it sends no token.
func NewClient(addr string, opts ...ClientOption) *Client {
	c := &Client{addr: addr}
	for _, o := range opts {
		o(c)
	}
	tr := &http.Transport{}
	if IsUnix(addr) {
		c.token = ""
		path := strings.TrimPrefix(addr, "unix:")
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}
		c.base = "http://e31d"
	} else {
		c.base = "http://" + addr
	}
	c.http = &http.Client{Transport: tr}
	return c
}

// Addr is the address the client talks to.
func (c *Client) Addr() string { return c.addr }

// Do sends a request with an optional JSON body and decodes a JSON reply into
// out (which may be nil).
func (c *Client) Do(ctx context.Context, method, path string, query url.Values, in, out any) error {
	resp, err := c.send(ctx, method, path, query, in)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decode reply of %s %s: %w", method, path, err)
	}
	return nil
}

// send sends a request and returns a reply whose status is a success; the
// caller closes its body.
func (c *Client) send(ctx context.Context, method, path string, query url.Values, in any) (*http.Response, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, err
		}
		body = bytes.NewReader(b)
	}
	u := c.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := c.newRequest(ctx, method, u, body, "application/json")
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, c.unreachable(ctx, err)
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		var e Error
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if json.Unmarshal(b, &e) == nil && e.Error != "" {
			return nil, &StatusError{Code: resp.StatusCode, Msg: e.Error}
		}
		return nil, &StatusError{Code: resp.StatusCode, Msg: strings.TrimSpace(string(b))}
	}
	return resp, nil
}

// newRequest is a request to the daemon with what every request carries:
// the token, on a TCP address, and the body's type on every method that
// may change something, with a body or none, since the daemon refuses
// such a request of any other type (a web page can send text/plain or a
// form to any address without asking, application/json only after the
// daemon's consent, which it never gives).
func (c *Client) newRequest(ctx context.Context, method, url string, body io.Reader, contentType string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return nil, err
	}
	if method != http.MethodGet && method != http.MethodHead {
		req.Header.Set("Content-Type", contentType)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	return req, nil
}

// unreachable explains a request that reached no daemon.
func (c *Client) unreachable(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("%w at %s (is the daemon running? start it with e31d, or set --api / E31_API): %v", ErrNoDaemon, c.addr, err)
}

// StatusError is an error the daemon reported.
type StatusError struct {
	Code int
	Msg  string
}

func (e *StatusError) Error() string { return e.Msg }

// Unwrap makes a 503 (the daemon is stopping: a request in flight when it
// began to) an ErrNoDaemon: what is asked of a daemon on its way down is
// asked again of the one that starts next.
func (e *StatusError) Unwrap() error {
	if e.Code == http.StatusServiceUnavailable {
		return ErrNoDaemon
	}
	return nil
}

// ID asks the daemon who it is.
func (c *Client) ID(ctx context.Context) (ID, error) {
	var out ID
	return out, c.Do(ctx, http.MethodGet, "/v1/id", nil, nil, &out)
}

// Drain drains the node: it takes no new work, and what runs ends as the
// mode says.
func (c *Client) Drain(ctx context.Context, req DrainRequest) (Drain, error) {
	var out Drain
	return out, c.Do(ctx, http.MethodPost, "/v1/drain", nil, req, &out)
}

// Undrain ends the node's drain: it takes work again.
func (c *Client) Undrain(ctx context.Context) (Drain, error) {
	var out Drain
	return out, c.Do(ctx, http.MethodPost, "/v1/undrain", nil, nil, &out)
}

// Peers lists connected peers.
func (c *Client) Peers(ctx context.Context) ([]Peer, error) {
	var out []Peer
	return out, c.Do(ctx, http.MethodGet, "/v1/peers", nil, nil, &out)
}

// Nodes lists the providers in the daemon's view of offers.
func (c *Client) Nodes(ctx context.Context) ([]Node, error) {
	var out []Node
	return out, c.Do(ctx, http.MethodGet, "/v1/nodes", nil, nil, &out)
}

// Submit sends a declaration (JSON or YAML bytes, with absolute local
// paths) and reports import progress to onProgress until the job is
// created.
func (c *Client) Submit(ctx context.Context, req SubmitRequest, onProgress func(Transfer)) (Job, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return Job{}, err
	}
	hr, err := c.newRequest(ctx, http.MethodPost, c.base+"/v1/jobs", bytes.NewReader(b), "application/json")
	if err != nil {
		return Job{}, err
	}
	resp, err := c.http.Do(hr)
	if err != nil {
		return Job{}, c.unreachable(ctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		var e Error
		_ = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&e)
		return Job{}, &StatusError{Code: resp.StatusCode, Msg: e.Error}
	}
	dec := json.NewDecoder(resp.Body)
	for {
		var ev SubmitEvent
		if err := dec.Decode(&ev); err != nil {
			return Job{}, fmt.Errorf("submit: the daemon's answer ended early: %w", err)
		}
		switch {
		case ev.Error != "":
			return Job{}, &StatusError{Code: http.StatusBadRequest, Msg: ev.Error}
		case ev.Job != nil:
			return *ev.Job, nil
		case ev.Progress != nil && onProgress != nil:
			onProgress(*ev.Progress)
		}
	}
}

// Jobs lists the jobs submitted from this node.
func (c *Client) Jobs(ctx context.Context) ([]Job, error) {
	var out []Job
	return out, c.Do(ctx, http.MethodGet, "/v1/jobs", nil, nil, &out)
}

// Attempts lists every attempt of this node's jobs on its own, each under
// its own ID (GET /v1/jobs?attempts=1): the jobs as Jobs lists them but
// with each resumption apart, naming its job in Root.
func (c *Client) Attempts(ctx context.Context) ([]Job, error) {
	var out []Job
	return out, c.Do(ctx, http.MethodGet, "/v1/jobs?attempts=1", nil, nil, &out)
}

// Job returns one job by ID or unique ID prefix.
func (c *Client) Job(ctx context.Context, id string) (Job, error) {
	var out Job
	return out, c.Do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id), nil, nil, &out)
}

// WaitJob returns a job once its version is not version, or it has ended,
// or after wait with the job as it is (GET /v1/jobs/{id}?wait=). A daemon
// that predates waiting answers at once.
func (c *Client) WaitJob(ctx context.Context, id string, version uint64, wait time.Duration) (Job, error) {
	var out Job
	q := url.Values{"wait": {wait.String()}, "version": {strconv.FormatUint(version, 10)}}
	return out, c.Do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id), q, nil, &out)
}

// NextJob waits once for job j to change (WaitJob, for up to wait) and
// returns it as it then is. A daemon that answers at once with nothing new
// (one that predates waiting) is not asked again before pause has passed:
// NextJob waits it out, so that a caller looping until the job ends polls
// such a daemon every pause instead of spinning.
func (c *Client) NextJob(ctx context.Context, j Job, wait, pause time.Duration) (Job, error) {
	asked := time.Now()
	next, err := c.WaitJob(ctx, j.ID, j.Version, wait)
	if err != nil || next.Version != j.Version || time.Since(asked) >= wait/2 {
		return next, err
	}
	t := time.NewTimer(pause)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return next, ctx.Err()
	case <-t.C:
		return next, nil
	}
}

// Withdraw withdraws a job.
func (c *Client) Withdraw(ctx context.Context, id string) (Job, error) {
	var out Job
	return out, c.Do(ctx, http.MethodPost, "/v1/jobs/"+url.PathEscape(id)+"/withdraw", nil, nil, &out)
}

// Get writes a job's output (or last checkpoint) into an absolute dir.
func (c *Client) Get(ctx context.Context, id string, req GetRequest) (GetResult, error) {
	var out GetResult
	return out, c.Do(ctx, http.MethodPost, "/v1/jobs/"+url.PathEscape(id)+"/get", nil, req, &out)
}

// Receipts lists receipts, of one job when job is not empty, and verifies
// the ledger when verify is set.
func (c *Client) Receipts(ctx context.Context, job string, verify bool) (Receipts, error) {
	q := url.Values{}
	if job != "" {
		q.Set("job", job)
	}
	if verify {
		q.Set("verify", "1")
	}
	var out Receipts
	return out, c.Do(ctx, http.MethodGet, "/v1/receipts", q, nil, &out)
}

// UsageQuery narrows Usage. The zero value counts everything.
type UsageQuery struct {
	Since time.Time // count only time held since then
	Peer  string    // only leases with this counterpart
	Job   string    // only this job's leases, or every task's of an array (an ID or prefix)
	// Tasks, with Job, asks for the job's held and owed time per task
	// (an api.JobUsage) instead of per counterpart.
	Tasks bool
}

// Usage returns the GPU-hours held per counterpart and GPU model, and what
// the daemon's policy makes owed: a ledger.UsageReport as JSON; with
// Tasks, a JobUsage as JSON.
func (c *Client) Usage(ctx context.Context, uq UsageQuery) (json.RawMessage, error) {
	q := url.Values{}
	if !uq.Since.IsZero() {
		q.Set("since", uq.Since.Format(time.RFC3339Nano))
	}
	if uq.Peer != "" {
		q.Set("peer", uq.Peer)
	}
	if uq.Job != "" {
		q.Set("job", uq.Job)
	}
	if uq.Tasks {
		q.Set("tasks", "1")
	}
	var out json.RawMessage
	return out, c.Do(ctx, http.MethodGet, "/v1/usage", q, nil, &out)
}

// ExportReceipts streams the daemon's export file of its receipts (all, or
// one job's) to w, and returns the bytes written. The file verifies with
// ledger.VerifyExport, with no daemon.
func (c *Client) ExportReceipts(ctx context.Context, job string, w io.Writer) (int64, error) {
	q := url.Values{}
	if job != "" {
		q.Set("job", job)
	}
	resp, err := c.send(ctx, http.MethodGet, "/v1/receipts/export", q, nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		return n, fmt.Errorf("export receipts: %w", err)
	}
	return n, nil
}

// Doctor runs the daemon's checks of its machine (e31d doctor) with the
// daemon's own configuration.
func (c *Client) Doctor(ctx context.Context) (DoctorReport, error) {
	var out DoctorReport
	return out, c.Do(ctx, http.MethodGet, "/v1/doctor", nil, nil, &out)
}

// Matches returns the node's recent Match results, oldest first.
func (c *Client) Matches(ctx context.Context) ([]Match, error) {
	var out []Match
	return out, c.Do(ctx, http.MethodGet, "/v1/matches", nil, nil, &out)
}

// Block cuts the node off from peers (nil heals), for tests of a split
// network.
func (c *Client) Block(ctx context.Context, peers []string) error {
	return c.Do(ctx, http.MethodPost, "/v1/debug/block", nil, Block{Peers: peers}, nil)
}

// ImportImage imports an image into the daemon's store, reporting progress
// to onProgress, and returns it.
func (c *Client) ImportImage(ctx context.Context, req ImageImportRequest, onProgress func(Transfer)) (Image, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return Image{}, err
	}
	hr, err := c.newRequest(ctx, http.MethodPost, c.base+"/v1/images", bytes.NewReader(b), "application/json")
	if err != nil {
		return Image{}, err
	}
	resp, err := c.http.Do(hr)
	if err != nil {
		return Image{}, c.unreachable(ctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		var e Error
		_ = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&e)
		return Image{}, &StatusError{Code: resp.StatusCode, Msg: e.Error}
	}
	dec := json.NewDecoder(resp.Body)
	for {
		var ev ImageEvent
		if err := dec.Decode(&ev); err != nil {
			return Image{}, fmt.Errorf("image import: the daemon's answer ended early: %w", err)
		}
		switch {
		case ev.Error != "":
			return Image{}, &StatusError{Code: http.StatusBadRequest, Msg: ev.Error}
		case ev.Image != nil:
			return *ev.Image, nil
		case ev.Progress != nil && onProgress != nil:
			onProgress(*ev.Progress)
		}
	}
}

// Images lists the images imported into the daemon's store.
func (c *Client) Images(ctx context.Context) ([]Image, error) {
	var out []Image
	return out, c.Do(ctx, http.MethodGet, "/v1/images", nil, nil, &out)
}

// RemoveImage drops an imported image's pins; its blocks go at the next GC
// unless a job still holds them.
func (c *Client) RemoveImage(ctx context.Context, cid string) error {
	return c.Do(ctx, http.MethodDelete, "/v1/images/"+url.PathEscape(cid), nil, nil, nil)
}
