package apiserver

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/submitter"
)

// The ledger's routes: receipts, usage and export. A job is named by the
// ID its user was shown, and its leases found under every job ID the
// ledger knows it by (Jobs.LedgerJobs); held and owed time is summed by
// the ledger alone (ledger.Policy.Bill), so these routes and a job's
// status give the same figures.

// ledgerJobs is the set of the ledger's job IDs of the job named: every
// attempt and task of a job this node submitted (Jobs.LedgerJobs); for one
// it did not (a provider's view of a stranger's job), the ID and, for an
// array, each of its tasks.
func (s *Server) ledgerJobs(job string) (api.JobIDs, func(string) bool, error) {
	ids, err := s.cfg.Jobs.LedgerJobs(job)
	switch {
	case err == nil:
		set := make(map[string]bool, len(ids.IDs))
		for _, id := range ids.IDs {
			set[id] = true
		}
		return ids, func(j string) bool { return set[j] }, nil
	case errors.Is(err, submitter.ErrNotFound):
		full := s.cfg.Jobs.FullID(job)
		return api.JobIDs{ID: full}, jobOrTasks(full), nil
	}
	return api.JobIDs{}, nil, err
}

// jobOrTasks accepts the job id and, where id is an array, each of its
// tasks: an array's usage is the sum of its tasks' leases.
func jobOrTasks(id string) func(string) bool {
	return func(job string) bool {
		if job == id {
			return true
		}
		array, _, ok := market.SplitTaskID(job)
		return ok && array == id
	}
}

// receipts lists ledger receipts, optionally of one job with what its
// leases held and owe, and verifies the whole ledger when asked.
func (s *Server) receipts(r *http.Request) (any, error) {
	ctx := r.Context()
	var entries []ledger.Entry
	var held *api.Held
	var err error
	if job := r.URL.Query().Get("job"); job != "" {
		entries, held, err = s.jobReceipts(ctx, job)
	} else {
		entries, err = s.cfg.Ledger.All(ctx)
	}
	if err != nil {
		return nil, err
	}
	out, err := receiptsAnswer(entries)
	if err != nil {
		return nil, err
	}
	out.Held = held
	if r.URL.Query().Get("verify") != "" {
		rep, err := s.cfg.Ledger.Verify(ctx)
		if err != nil {
			return nil, err
		}
		v := &api.Verify{Entries: rep.Entries, OneSided: rep.OneSided, Disputed: rep.Disputed, Unbounded: rep.Unbounded, OK: rep.OK}
		if rep.FirstBad != nil {
			v.Problem = fmt.Sprintf("entry %d (lease %s, receipt %d): %s", rep.FirstBad.Index, rep.FirstBad.Lease, rep.FirstBad.Seq, rep.FirstBad.Problem)
		}
		out.Verify = v
	}
	return out, nil
}

// jobReceipts are the ledger entries of a job, in ledger order: of each
// of its attempts and tasks (ledgerJobs), with the sum of what they held.
func (s *Server) jobReceipts(ctx context.Context, job string) ([]ledger.Entry, *api.Held, error) {
	ids, keep, err := s.ledgerJobs(job)
	if err != nil {
		return nil, nil, err
	}
	var out []ledger.Entry
	if ids.IDs == nil {
		// Not a job of this node: its ID and its tasks', wherever they
		// are in the ledger.
		all, err := s.cfg.Ledger.All(ctx)
		if err != nil {
			return nil, nil, err
		}
		for _, e := range all {
			if keep(entryJob(&e)) {
				out = append(out, e)
			}
		}
	} else {
		for _, id := range ids.IDs {
			es, err := s.cfg.Ledger.ByJob(ctx, id)
			if err != nil {
				return nil, nil, err
			}
			out = append(out, es...)
		}
		slices.SortFunc(out, func(a, b ledger.Entry) int { return cmp.Compare(a.Index, b.Index) })
	}
	var jobs []string
	for i := range out {
		if j := entryJob(&out[i]); !slices.Contains(jobs, j) {
			jobs = append(jobs, j)
		}
	}
	h, err := s.cfg.Ledger.HeldByJobs(ctx, ledger.DefaultPolicy(), jobs...)
	if err != nil {
		return nil, nil, err
	}
	return out, submitter.HeldOf(h), nil
}

// entryJob is the job of a ledger entry: its receipt's, or its dispute's.
func entryJob(e *ledger.Entry) string {
	if e.Dispute != nil {
		return e.Dispute.Ours.Job
	}
	return e.Receipt.Job
}

// receiptsAnswer splits ledger entries into receipts and disputes: a
// dispute entry's Receipt is zero, its content is in Dispute.
func receiptsAnswer(entries []ledger.Entry) (api.Receipts, error) {
	var out api.Receipts
	rs := make([]ledger.Receipt, 0, len(entries))
	for _, e := range entries {
		if e.Dispute != nil {
			ours, err := json.Marshal(e.Dispute.Ours)
			if err != nil {
				return out, err
			}
			theirs, err := json.Marshal(e.Dispute.Theirs)
			if err != nil {
				return out, err
			}
			out.Disputes = append(out.Disputes, api.Dispute{Index: e.Index, Lease: e.Dispute.Lease,
				Ours: ours, Theirs: theirs, Superseded: e.Superseded})
			continue
		}
		if e.Superseded {
			out.Superseded = append(out.Superseded, len(rs))
		}
		rs = append(rs, e.Receipt)
	}
	b, err := json.Marshal(rs)
	if err != nil {
		return out, err
	}
	out.Receipts = b
	return out, nil
}

// usage sums held GPU-hours under the default policy; with job and tasks,
// per task of the job (taskUsage).
func (s *Server) usage(r *http.Request) (any, error) {
	q := r.URL.Query()
	var f ledger.UsageFilter
	var err error
	if f.Since, err = api.ParseSince(q.Get("since"), time.Now()); err != nil {
		return nil, badRequest(err)
	}
	if f.Peer, err = parsePeer(q.Get("peer")); err != nil {
		return nil, err
	}
	job := q.Get("job")
	if q.Get("tasks") != "" {
		if job == "" || !f.Since.IsZero() || f.Peer != "" {
			return nil, badRequest(errors.New("tasks sums whole tasks of one job: give job, and neither since nor peer"))
		}
		return s.taskUsage(r.Context(), job)
	}
	if job != "" {
		if _, f.Job, err = s.ledgerJobs(job); err != nil {
			return nil, err
		}
	}
	return s.cfg.Ledger.Usage(r.Context(), f, ledger.DefaultPolicy())
}

// taskUsage is what each task of a job this node submitted held and owes,
// over its attempts, and the whole job's: a job that is no array is one
// row.
func (s *Server) taskUsage(ctx context.Context, job string) (api.JobUsage, error) {
	ids, err := s.cfg.Jobs.LedgerJobs(job)
	if err != nil {
		return api.JobUsage{}, err
	}
	tasks := ids.Tasks
	if len(tasks) == 0 {
		j, err := s.cfg.Jobs.Job(ids.ID)
		if err != nil {
			return api.JobUsage{}, err
		}
		tasks = []api.TaskIDs{{Index: 0, ID: ids.ID, IDs: ids.IDs, State: j.State, Outcome: j.Outcome, Attribution: j.Attribution}}
	}
	policy := ledger.DefaultPolicy()
	out := api.JobUsage{ID: ids.ID, Tasks: make([]api.TaskUsage, 0, len(tasks))}
	for _, t := range tasks {
		h, err := s.cfg.Ledger.HeldByJobs(ctx, policy, t.IDs...)
		if err != nil {
			return api.JobUsage{}, err
		}
		u := taskUsageOf(h)
		u.Index, u.ID, u.Attempts, u.State, u.Outcome, u.Attribution = t.Index, t.ID, len(t.IDs), t.State, t.Outcome, t.Attribution
		out.Tasks = append(out.Tasks, u)
		out.Total.Attempts += len(t.IDs)
	}
	h, err := s.cfg.Ledger.HeldByJobs(ctx, policy, ids.IDs...)
	if err != nil {
		return api.JobUsage{}, err
	}
	attempts := out.Total.Attempts
	out.Total = taskUsageOf(h)
	out.Total.Index, out.Total.Attempts = -1, attempts
	return out, nil
}

func taskUsageOf(h ledger.JobHeld) api.TaskUsage {
	return api.TaskUsage{Leases: h.Leases, GPUHours: h.GPUHours, OwedGPUHours: h.OwedGPUHours,
		NotOwedGPUHours: h.NotOwedGPUHours, CPUHours: h.CPUHours, OwedCPUHours: h.OwedCPUHours, LostGPUHours: h.LostGPUHours}
}

// exportReceipts streams the export file of the entries the query selects
// (job, lease, peer, since; all when none is set). A job is every entry of
// each of its attempts and tasks.
func (s *Server) exportReceipts(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := ledger.ExportFilter{Lease: q.Get("lease")}
	var err error
	if job := q.Get("job"); job != "" {
		if _, f.Jobs, err = s.ledgerJobs(job); err != nil {
			writeError(w, err)
			return
		}
	}
	if f.Since, err = api.ParseSince(q.Get("since"), time.Now()); err != nil {
		writeError(w, badRequest(err))
		return
	}
	if f.Peer, err = parsePeer(q.Get("peer")); err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	cw := &countingWriter{w: w}
	if _, err := s.cfg.Ledger.Export(r.Context(), cw, f); err != nil {
		if cw.n == 0 {
			w.Header().Del("Content-Type")
			writeError(w, err)
			return
		}
		// The status is sent: abort the stream so that the client sees
		// a broken reply rather than a short file that looks whole.
		s.cfg.Log.Warn("receipts export failed", "err", err)
		panic(http.ErrAbortHandler)
	}
}

// countingWriter tells whether anything reached the client yet.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
