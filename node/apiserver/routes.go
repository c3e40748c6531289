package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/content/image"
	"github.com/e31network/e31/node/api"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"
)

func (s *Server) routes(mux *http.ServeMux) {
	n := s.cfg.Network
	mux.HandleFunc("GET /v1/id", handler(func(*http.Request) (any, error) { return n.ID(), nil }))
	mux.HandleFunc("GET /v1/peers", handler(func(*http.Request) (any, error) { return n.Peers(), nil }))
	mux.HandleFunc("GET /v1/peers/{id}/record", handler(s.peerRecord))
	mux.HandleFunc("GET /v1/nodes", handler(func(r *http.Request) (any, error) { return s.withScores(r.Context(), nodes(n, r)), nil }))
	mux.HandleFunc("GET /v1/matches", handler(func(*http.Request) (any, error) { return n.Matches(), nil }))
	if s.cfg.Market != nil {
		mux.HandleFunc("GET /v1/market", handler(func(*http.Request) (any, error) { return s.cfg.Market(), nil }))
	}
	mux.HandleFunc("POST /v1/jobs", s.submit)
	mux.HandleFunc("GET /v1/jobs", handler(func(r *http.Request) (any, error) {
		if r.URL.Query().Get("attempts") != "" {
			return s.cfg.Jobs.Attempts(), nil
		}
		return s.cfg.Jobs.Jobs(), nil
	}))
	mux.HandleFunc("GET /v1/jobs/{id}", handler(s.job))
	mux.HandleFunc("POST /v1/jobs/{id}/withdraw", handler(func(r *http.Request) (any, error) {
		return s.cfg.Jobs.Withdraw(r.Context(), s.cfg.Jobs.FullID(r.PathValue("id")))
	}))
	mux.HandleFunc("POST /v1/jobs/{id}/get", handler(s.get))
	mux.HandleFunc("GET /v1/jobs/{id}/logs", s.logs)
	mux.HandleFunc("GET /v1/receipts", handler(s.receipts))
	mux.HandleFunc("GET /v1/receipts/export", s.exportReceipts)
	mux.HandleFunc("GET /v1/usage", handler(s.usage))
	mux.HandleFunc("GET /v1/leases", handler(s.leases))
	if s.cfg.Drainer != nil {
		mux.HandleFunc("GET /v1/drain", handler(func(*http.Request) (any, error) { return s.cfg.Drainer.DrainStatus(), nil }))
		mux.HandleFunc("POST /v1/drain", handler(s.drain))
		mux.HandleFunc("POST /v1/undrain", handler(func(*http.Request) (any, error) { return s.cfg.Drainer.Undrain(), nil }))
	}
	mux.HandleFunc("POST /v1/images", s.importImage)
	mux.HandleFunc("GET /v1/images", handler(s.listImages))
	if !s.cfg.readOnly {
		mux.HandleFunc("GET /v1/doctor", handler(func(r *http.Request) (any, error) {
			if s.cfg.Doctor == nil {
				return nil, ErrNoDoctor
			}
			return s.cfg.Doctor(r.Context()), nil
		}))
	}
	mux.HandleFunc("DELETE /v1/images/{cid}", handler(s.removeImage))
	mux.HandleFunc("POST /v1/ui/link", handler(s.uiLink))
	if s.cfg.Block != nil {
		mux.HandleFunc("POST /v1/debug/block", handler(s.block))
	}
	s.debugCARRoute(mux)
}

// maxJobWait caps how long GET /v1/jobs/{id}?wait= holds a request.
const maxJobWait = 5 * time.Minute

// job answers GET /v1/jobs/{id}. With wait=DURATION (and version=N, the
// version the client last got; 0 when absent), it answers once the job's
// version is not N or the job has ended, or after DURATION (at most
// maxJobWait) with the job as it is: a client follows a job without
// polling, and hears of each step as it is reached.
func (s *Server) job(r *http.Request) (any, error) {
	id := r.PathValue("id")
	q := r.URL.Query()
	if !q.Has("wait") {
		if q.Has("version") {
			return nil, badRequest(errors.New("version is only read with wait"))
		}
		return s.cfg.Jobs.Job(id)
	}
	wait, err := time.ParseDuration(q.Get("wait"))
	if err != nil || wait < 0 {
		return nil, badRequest(fmt.Errorf("wait %q: want a duration such as 30s", q.Get("wait")))
	}
	var seen uint64
	if v := q.Get("version"); v != "" {
		if seen, err = strconv.ParseUint(v, 10, 64); err != nil {
			return nil, badRequest(fmt.Errorf("version %q: want the version a previous answer gave", v))
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), min(wait, maxJobWait))
	defer cancel()
	return s.cfg.Jobs.WaitJob(ctx, id, seen)
}

// submit streams NDJSON: progress of input imports, then the job.
func (s *Server) submit(w http.ResponseWriter, r *http.Request) {
	var req api.SubmitRequest
	if err := decode(r, &req); err != nil {
		writeError(w, badRequest(fmt.Errorf("submit request: %w", err)))
		return
	}
	if req.ResumeOf != "" {
		j, err := s.cfg.Jobs.Job(req.ResumeOf)
		if err != nil {
			writeError(w, err)
			return
		}
		req.ResumeOf = j.ID
	}
	if err := checkPaths(r.Context(), func(pc *pathCheck) error { return pc.submitRequest(req) }); err != nil {
		writeError(w, err)
		return
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
	progress := &streamProgress{emit: func(t api.Transfer) { emit(api.SubmitEvent{Progress: &t}) }}
	j, err := s.cfg.Jobs.Submit(r.Context(), req, progress)
	if err != nil {
		if status(err) == http.StatusInternalServerError {
			s.cfg.Log.Warn("submit failed", "err", err)
		}
		emit(api.SubmitEvent{Error: err.Error()})
		return
	}
	emit(api.SubmitEvent{Job: &j})
}

// streamProgress turns import progress into NDJSON events, at most one per
// MiB so that the stream stays small.
type streamProgress struct {
	emit        func(api.Transfer)
	what        string
	done, total int64
	lastSent    int64
}

func (p *streamProgress) Start(total int64, what string) {
	p.what, p.total, p.done, p.lastSent = what, total, 0, 0
	p.emit(api.Transfer{What: what, Total: total})
}

func (p *streamProgress) Add(n int64) {
	p.done += n
	if p.done-p.lastSent >= 1<<20 {
		p.lastSent = p.done
		p.emit(api.Transfer{What: p.what, Done: p.done, Total: p.total})
	}
}

func (p *streamProgress) Done() {
	p.emit(api.Transfer{What: p.what, Done: p.done, Total: max(p.total, p.done)})
}

// get writes a job's output or last checkpoint into a folder.
func (s *Server) get(r *http.Request) (any, error) {
	var req api.GetRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	if !filepath.IsAbs(req.Dir) {
		return nil, badRequest(fmt.Errorf("output dir %q must be absolute", req.Dir))
	}
	_, c, err := s.cfg.Jobs.Output(r.PathValue("id"), req.Checkpoint, req.Attempt)
	if err != nil {
		return nil, err
	}
	// For a caller of another uid, the folder is written where its links
	// lead once checked, and given to the caller after.
	dest, existed := req.Dir, false
	pc, err := pathCheckFor(r.Context())
	if err == nil && pc != nil {
		dest, existed, err = pc.mayWriteIn(req.Dir)
	}
	if err != nil {
		return nil, fmt.Errorf("output dir %s: %w", req.Dir, err)
	}
	if entries, err := os.ReadDir(dest); err == nil && len(entries) > 0 {
		return nil, badRequest(fmt.Errorf("output dir %s is not empty", req.Dir))
	}
	if err := s.cfg.Content.Export(r.Context(), c, dest, content.ExportOptions{Limits: s.cfg.GetLimits}); err != nil {
		return nil, fmt.Errorf("write %s to %s: %w", c, req.Dir, err)
	}
	if pc != nil {
		if err := pc.give(dest, !existed); err != nil {
			return nil, fmt.Errorf("give %s to uid %d: %w", req.Dir, pc.c.UID, err)
		}
	}
	size, err := s.cfg.Content.Size(r.Context(), c)
	if err != nil {
		return nil, fmt.Errorf("size of %s: %w", c, err)
	}
	return api.GetResult{CID: c.String(), Dir: req.Dir, Bytes: size}, nil
}

func parsePeer(v string) (peer.ID, error) {
	if v == "" {
		return "", nil
	}
	id, err := peer.Decode(v)
	if err != nil {
		return "", badRequest(fmt.Errorf("peer %q: %w", v, err))
	}
	return id, nil
}

// block cuts this node off from the peers named (an empty list heals): how
// a test splits the network into parts on one machine.
func (s *Server) block(r *http.Request) (any, error) {
	var req api.Block
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	var ids []peer.ID
	for _, p := range req.Peers {
		id, err := peer.Decode(p)
		if err != nil {
			return nil, badRequest(fmt.Errorf("peer %q: %w", p, err))
		}
		ids = append(ids, id)
	}
	s.cfg.Block(ids)
	s.cfg.Log.Info("blocked peers", "peers", len(ids))
	return req, nil
}

// importImage streams NDJSON: progress of the import, then the image.
func (s *Server) importImage(w http.ResponseWriter, r *http.Request) {
	var req api.ImageImportRequest
	if err := decode(r, &req); err != nil {
		writeError(w, badRequest(fmt.Errorf("image import request: %w", err)))
		return
	}
	if err := checkPaths(r.Context(), func(pc *pathCheck) error { return pc.image(req.Ref) }); err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	flusher, _ := w.(http.Flusher)
	emit := func(ev api.ImageEvent) {
		_ = json.NewEncoder(w).Encode(ev)
		if flusher != nil {
			flusher.Flush()
		}
	}
	rec, err := s.cfg.Images.Import(r.Context(), req.Ref, &streamProgress{emit: func(t api.Transfer) { emit(api.ImageEvent{Progress: &t}) }})
	if err != nil {
		if status(err) == http.StatusInternalServerError {
			s.cfg.Log.Warn("image import failed", "ref", req.Ref, "err", err)
		}
		emit(api.ImageEvent{Error: err.Error()})
		return
	}
	im := apiImage(rec)
	emit(api.ImageEvent{Image: &im})
}

func (s *Server) listImages(r *http.Request) (any, error) {
	recs, err := s.cfg.Images.List(r.Context())
	if err != nil {
		return nil, err
	}
	out := make([]api.Image, 0, len(recs))
	for _, rec := range recs {
		out = append(out, apiImage(rec))
	}
	return out, nil
}

func (s *Server) removeImage(r *http.Request) (any, error) {
	c, err := cid.Decode(r.PathValue("cid"))
	if err != nil {
		return nil, badRequest(fmt.Errorf("image %q: %w", r.PathValue("cid"), err))
	}
	if err := s.cfg.Images.Remove(r.Context(), c); err != nil {
		return nil, err
	}
	return struct{}{}, nil
}

func apiImage(r image.Record) api.Image {
	return api.Image{CID: r.CID.String(), Ref: r.Ref, Pinned: r.Pinned, Digest: r.Digest, Platform: r.Platform,
		Size: r.Size, Layers: r.Layers, Created: r.Created}
}

// drain drains the node as the request says (e31 drain).
func (s *Server) drain(r *http.Request) (any, error) {
	var req api.DrainRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	if req.Mode == "" {
		req.Mode = api.DrainGraceful
	}
	var deadline time.Time
	if req.Deadline != "" {
		d, err := time.ParseDuration(req.Deadline)
		if err != nil || d <= 0 {
			return nil, badRequest(fmt.Errorf("drain deadline %q: want a positive duration such as 30m", req.Deadline))
		}
		if req.Mode != api.DrainGraceful {
			return nil, badRequest(fmt.Errorf("a deadline is for a graceful drain; a %s drain stops what runs now", req.Mode))
		}
		deadline = time.Now().Add(d)
	}
	d, err := s.cfg.Drainer.Drain(req.Mode, deadline)
	if err != nil {
		return nil, badRequest(err)
	}
	return d, nil
}
