package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/node/api"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"
)

// maxRequestBody caps what a client may post.
const maxRequestBody = 1 << 20

func (n *Node) jobRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/jobs", n.apiSubmit)
	mux.HandleFunc("GET /v1/jobs", handler(func(r *http.Request) (any, error) { return n.apiJobs(), nil }))
	mux.HandleFunc("GET /v1/jobs/{id}", handler(func(r *http.Request) (any, error) { return n.apiJobByID(r.PathValue("id")) }))
	mux.HandleFunc("POST /v1/jobs/{id}/withdraw", handler(func(r *http.Request) (any, error) {
		j, err := n.withdraw(r.Context(), r.PathValue("id"))
		if err != nil {
			return nil, err
		}
		return apiJob(j), nil
	}))
	mux.HandleFunc("POST /v1/jobs/{id}/get", handler(n.apiGet))
	mux.HandleFunc("GET /v1/receipts", handler(n.apiReceipts))
	mux.HandleFunc("POST /v1/debug/block", handler(n.apiBlock))
	mux.HandleFunc("GET /v1/matches", handler(func(r *http.Request) (any, error) {
		n.mu.Lock()
		defer n.mu.Unlock()
		return slices.Clone(n.matches), nil
	}))
}

func (n *Node) apiJobs() []api.Job {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]api.Job, 0, len(n.jobs))
	for _, j := range n.jobs {
		out = append(out, apiJob(j))
	}
	slices.SortFunc(out, func(a, b api.Job) int {
		if c := a.Submitted.Compare(b.Submitted); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

// findJob resolves a job ID or a unique prefix of one. The caller holds
// n.mu.
func (n *Node) findJob(id string) (*jobRecord, error) {
	if j, ok := n.jobs[id]; ok {
		return j, nil
	}
	var found *jobRecord
	for k, j := range n.jobs {
		if id != "" && strings.HasPrefix(k, id) {
			if found != nil {
				return nil, badRequest(fmt.Errorf("job ID prefix %q is ambiguous", id))
			}
			found = j
		}
	}
	if found == nil {
		return nil, fmt.Errorf("job %s: %w (only jobs submitted from this node are known here)", id, errNotFound)
	}
	return found, nil
}

func (n *Node) apiJobByID(id string) (api.Job, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	j, err := n.findJob(id)
	if err != nil {
		return api.Job{}, err
	}
	return apiJob(j), nil
}

// apiSubmit streams NDJSON: progress of input imports, then the job.
func (n *Node) apiSubmit(w http.ResponseWriter, r *http.Request) {
	var req api.SubmitRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, maxRequestBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		handler(func(*http.Request) (any, error) { return nil, badRequest(fmt.Errorf("submit request: %w", err)) })(w, r)
		return
	}
	if req.ResumeOf != "" {
		n.mu.Lock()
		j, err := n.findJob(req.ResumeOf)
		n.mu.Unlock()
		if err != nil {
			handler(func(*http.Request) (any, error) { return nil, err })(w, r)
			return
		}
		req.ResumeOf = j.ID
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	flusher, _ := w.(http.Flusher)
	var mu sync.Mutex
	emit := func(ev api.SubmitEvent) {
		mu.Lock()
		defer mu.Unlock()
		_ = json.NewEncoder(w).Encode(ev)
		if flusher != nil {
			flusher.Flush()
		}
	}
	j, err := n.submit(r.Context(), req.Declaration, req.ResumeOf, &streamProgress{emit: emit})
	if err != nil {
		var he *httpError
		if !errors.As(err, &he) {
			n.log.Warn("submit failed", "err", err)
		}
		emit(api.SubmitEvent{Error: err.Error()})
		return
	}
	n.mu.Lock()
	aj := apiJob(j)
	n.mu.Unlock()
	emit(api.SubmitEvent{Job: &aj})
}

// streamProgress turns import progress into NDJSON events, at most one per
// MiB so that the stream stays small.
type streamProgress struct {
	emit        func(api.SubmitEvent)
	what        string
	done, total int64
	lastSent    int64
}

func (p *streamProgress) Start(total int64, what string) {
	p.what, p.total, p.done, p.lastSent = what, total, 0, 0
	p.emit(api.SubmitEvent{Progress: &api.Transfer{What: what, Total: total}})
}

func (p *streamProgress) Add(n int64) {
	p.done += n
	if p.done-p.lastSent >= 1<<20 {
		p.lastSent = p.done
		p.emit(api.SubmitEvent{Progress: &api.Transfer{What: p.what, Done: p.done, Total: p.total}})
	}
}

func (p *streamProgress) Done() {
	p.emit(api.SubmitEvent{Progress: &api.Transfer{What: p.what, Done: p.done, Total: max(p.total, p.done)}})
}

// apiGet writes a job's output or last checkpoint into a folder.
func (n *Node) apiGet(r *http.Request) (any, error) {
	var req api.GetRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, maxRequestBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return nil, badRequest(err)
	}
	if !filepath.IsAbs(req.Dir) {
		return nil, badRequest(fmt.Errorf("output dir %q must be absolute", req.Dir))
	}
	n.mu.Lock()
	j, err := n.findJob(r.PathValue("id"))
	var which string
	if err == nil {
		which = j.Output
		if req.Checkpoint {
			which = j.Checkpoint
		}
	}
	id, state := "", ""
	if j != nil {
		id, state = j.ID, j.State
	}
	n.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if which == "" {
		what := "output"
		if req.Checkpoint {
			what = "checkpoint"
		}
		return nil, &httpError{code: http.StatusConflict, err: fmt.Errorf("job %s has no %s yet (state %s)", id, what, state)}
	}
	c, err := cid.Decode(which)
	if err != nil {
		return nil, err
	}
	if entries, err := os.ReadDir(req.Dir); err == nil && len(entries) > 0 {
		return nil, badRequest(fmt.Errorf("output dir %s is not empty", req.Dir))
	}
	if err := n.store.Export(r.Context(), c, req.Dir, nil); err != nil {
		return nil, fmt.Errorf("write %s to %s: %w", c, req.Dir, err)
	}
	size, _ := n.store.Size(r.Context(), c)
	return api.GetResult{CID: c.String(), Dir: req.Dir, Bytes: size}, nil
}

// apiReceipts lists ledger receipts, optionally of one job, and verifies
// the whole ledger when asked.
func (n *Node) apiReceipts(r *http.Request) (any, error) {
	ctx := r.Context()
	var entries []ledger.Entry
	var err error
	if job := r.URL.Query().Get("job"); job != "" {
		n.mu.Lock()
		if j, ferr := n.findJob(job); ferr == nil {
			job = j.ID
		}
		n.mu.Unlock()
		entries, err = n.ledger.ByJob(ctx, job)
	} else {
		entries, err = n.ledger.All(ctx)
	}
	if err != nil {
		return nil, err
	}
	rs := make([]ledger.Receipt, 0, len(entries))
	for _, e := range entries {
		rs = append(rs, e.Receipt)
	}
	b, err := json.Marshal(rs)
	if err != nil {
		return nil, err
	}
	out := api.Receipts{Receipts: b}
	if r.URL.Query().Get("verify") != "" {
		rep, err := n.ledger.Verify(ctx)
		if err != nil {
			return nil, err
		}
		v := &api.Verify{Entries: rep.Entries, OK: rep.OK}
		if rep.FirstBad != nil {
			v.Problem = fmt.Sprintf("entry %d (lease %s, receipt %d): %s", rep.FirstBad.Index, rep.FirstBad.Lease, rep.FirstBad.Seq, rep.FirstBad.Problem)
		}
		out.Verify = v
	}
	return out, nil
}

// apiBlock cuts this node off from the peers named (an empty list heals):
// how a test splits the network into parts on one machine.
func (n *Node) apiBlock(r *http.Request) (any, error) {
	var req api.Block
	dec := json.NewDecoder(io.LimitReader(r.Body, maxRequestBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return nil, badRequest(err)
	}
	var ids []peer.ID
	for _, s := range req.Peers {
		id, err := peer.Decode(s)
		if err != nil {
			return nil, badRequest(fmt.Errorf("peer %q: %w", s, err))
		}
		ids = append(ids, id)
	}
	n.gater.Block(ids)
	for _, id := range ids {
		_ = n.host.Network().ClosePeer(id)
	}
	n.log.Info("blocked peers", "peers", len(ids))
	return req, nil
}
