package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/p2p"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"
)

// submit validates a declaration, imports its local inputs, signs it and
// broadcasts it. Nothing is broadcast for a declaration that fails any
// check.
func (n *Node) submit(ctx context.Context, raw []byte, resumeOf string, progress content.Progress) (*jobRecord, error) {
	var decl market.Declaration
	if resumeOf != "" {
		d, err := n.resumeDeclaration(resumeOf)
		if err != nil {
			return nil, err
		}
		decl = d
	} else {
		d, err := market.DecodeDeclaration(raw)
		if err != nil {
			return nil, badRequest(err)
		}
		decl = d
	}
	if err := market.CheckSources(decl, func(path string) (bool, error) {
		if !filepath.IsAbs(path) {
			return false, fmt.Errorf("%q is not an absolute path", path)
		}
		_, err := os.Stat(path)
		if errors.Is(err, os.ErrNotExist) {
			return false, nil
		}
		return err == nil, err
	}); err != nil {
		return nil, badRequest(err)
	}
	sources := make([]string, len(decl.Data))
	for i, in := range decl.Data {
		sources[i] = in.Source
		if _, err := cid.Decode(in.Source); err == nil {
			continue
		}
		c, _, err := n.store.Import(ctx, in.Source, content.ImportOptions{MaxBytes: n.cfg.MaxInputBytes, Progress: progress, Pin: "input of a submitted job"})
		if err != nil {
			if errors.Is(err, content.ErrTooLarge) {
				return nil, badRequest(fmt.Errorf("data[%d].source: %w", i, err))
			}
			return nil, fmt.Errorf("import data[%d].source %s: %w", i, in.Source, err)
		}
		decl.Data[i].Source = c.String()
	}
	body := declarationBody{Declaration: decl, Addrs: n.Addrs(), ResumeOf: resumeOf}
	if err := body.check(); err != nil {
		return nil, badRequest(err)
	}
	s, err := p2p.Seal(n.key, kindDeclaration, body, time.Now())
	if err != nil {
		return nil, badRequest(err)
	}
	id := jobID(s)
	now := time.Now()
	j := &jobRecord{ID: id, Envelope: s.Raw, Declaration: decl, Sources: sources, ResumeOf: resumeOf, State: stateQueued, Submitted: now}
	j.step(stepSubmit, now)
	// Saved before it is broadcast: a proposal may arrive at once.
	n.mu.Lock()
	if parent, ok := n.jobs[resumeOf]; ok {
		j.Resumes = parent.Resumes + 1
	}
	n.jobs[id] = j
	err = n.state.put(prefixJob, id, j)
	n.mu.Unlock()
	if err != nil {
		return nil, err
	}
	for _, in := range decl.Data {
		c, _ := cid.Decode(in.Source)
		_ = n.store.Pin(ctx, c, "input of job "+id)
	}
	if err := n.gossip.PublishRaw(ctx, p2p.TopicJobs, s.Raw); err != nil {
		return nil, err
	}
	n.metrics.submitted.Inc()
	n.log.Info("job submitted", "job", id, "name", decl.Name, "gpus", decl.Request.GPUs)
	return j, nil
}

// resumeDeclaration builds the declaration of a job that continues another
// from its last checkpoint: the same work, with the checkpoint staged at
// the checkpoint path.
func (n *Node) resumeDeclaration(of string) (market.Declaration, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	j, ok := n.jobs[of]
	if !ok {
		return market.Declaration{}, fmt.Errorf("job %s: %w", of, errNotFound)
	}
	cp := j.Declaration.Output.Checkpoints
	if cp == nil {
		return market.Declaration{}, badRequest(fmt.Errorf("job %s declares no checkpoints to resume from", of))
	}
	if !j.terminal() {
		return market.Declaration{}, badRequest(fmt.Errorf("job %s is still %s; withdraw it first", of, j.State))
	}
	d := j.Declaration
	if j.Checkpoint == "" {
		if !j.Resumed {
			return market.Declaration{}, badRequest(fmt.Errorf("job %s has no checkpoint yet", of))
		}
		// Lost before its first checkpoint: an automatic resume starts it
		// again from the beginning.
		return d, d.Validate()
	}
	// The resumed run finds its checkpoint where it left it, read-only; it
	// writes new ones to the same path, which is a fresh writable mount. A
	// job that was itself a resumption swaps its old checkpoint for the new.
	mount := cp.Path + "-resume"
	d.Data = slices.DeleteFunc(slices.Clone(d.Data), func(in market.Input) bool { return in.Mount == mount })
	d.Data = append(d.Data, market.Input{Source: j.Checkpoint, Mount: mount})
	d.Work.Env = maps.Clone(d.Work.Env)
	if d.Work.Env == nil {
		d.Work.Env = map[string]string{}
	}
	d.Work.Env["E31_RESUME_FROM"] = mount
	return d, d.Validate()
}

// handleProposal answers a provider's lease proposal: accept the first for a
// queued job, decline every other. The acceptance is persisted before the
// countersignature leaves, so a crash cannot forget a lease it agreed to.
func (n *Node) handleProposal(ctx context.Context, from peer.ID, raw json.RawMessage) (any, error) {
	var req proposeRequest
	if err := p2p.DecodeStrict(raw, &req); err != nil {
		return nil, err
	}
	sl := req.Lease
	t := sl.Terms
	if t.Provider != from.String() {
		return nil, fmt.Errorf("proposal names provider %s but came from %s", t.Provider, from)
	}
	if t.Submitter != n.self.String() {
		return nil, errors.New("proposal is not addressed to this submitter")
	}
	if err := sl.verify(false); err != nil {
		return nil, err
	}
	if err := checkTerms(t); err != nil {
		return nil, err
	}
	if time.Now().UnixMilli() > t.Expires {
		return nil, errors.New("proposal expired")
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	j, ok := n.jobs[t.Job]
	if !ok {
		return nil, fmt.Errorf("job %s: %w", t.Job, errNotFound)
	}
	if j.State != stateQueued {
		return nil, fmt.Errorf("%s: job %s is %s", declinedNotQueued, t.Job, j.State)
	}
	req2 := j.Declaration.Request
	if len(t.GPUs) != req2.GPUs || t.Limit != req2.Limit || t.CPUs != req2.CPUs || t.MemoryBytes != uint64(req2.Memory) {
		return nil, errors.New("declined: terms do not match the declaration")
	}
	if !distinct(t.GPUs) {
		return nil, errors.New("declined: the proposal names a GPU twice")
	}
	if e, ok := n.offers.get(t.Provider); ok {
		for _, u := range t.GPUs {
			if !slices.ContainsFunc(e.offer.GPUs, func(g market.GPU) bool { return g.UUID == u }) {
				return nil, fmt.Errorf("declined: GPU %s is not in the provider's offer", u)
			}
		}
	}
	if err := sl.countersign(n.key); err != nil {
		return nil, err
	}
	now := time.Now()
	j.State = stateRenting
	j.Lease = &sl
	j.Wait = ""
	j.lastContact = now
	j.step(stepRent, now)
	if err := n.state.put(prefixJob, j.ID, j); err != nil {
		return nil, err
	}
	for _, in := range j.Declaration.Data {
		if c, err := cid.Decode(in.Source); err == nil {
			n.allowLocked(from, c)
		}
	}
	n.log.Info("lease accepted", "job", j.ID, "lease", t.ID, "provider", from)
	return proposeReply{SubmitterSig: sl.SubmitterSig}, nil
}

// declinedNotQueued opens the refusal of a proposal for a job that is no
// longer queued; a provider that reads it closes the job in its view.
const declinedNotQueued = "declined, not queued"

// leasedJob finds this node's job under a lease from the given provider.
// The caller holds n.mu.
func (n *Node) leasedJob(job, lease string, provider peer.ID) (*jobRecord, error) {
	j, ok := n.jobs[job]
	if !ok {
		return nil, fmt.Errorf("job %s: %w", job, errNotFound)
	}
	if j.Lease == nil || j.Lease.Terms.ID != lease || j.Lease.Terms.Provider != provider.String() {
		return nil, fmt.Errorf("job %s is not leased as %s from %s", job, lease, provider)
	}
	return j, nil
}

// handleEvent records a step the provider reached, or pulls a checkpoint.
func (n *Node) handleEvent(ctx context.Context, from peer.ID, raw json.RawMessage) (any, error) {
	var ev eventRequest
	if err := p2p.DecodeStrict(raw, &ev); err != nil {
		return nil, err
	}
	n.mu.Lock()
	j, err := n.leasedJob(ev.Job, ev.Lease, from)
	if err != nil {
		n.mu.Unlock()
		return nil, err
	}
	j.lastContact = time.Now()
	at := time.UnixMilli(ev.At)
	if time.Since(at).Abs() > time.Minute {
		at = time.Now() // the provider's clock is off; record our own
	}
	switch ev.Step {
	case stepRun:
		if j.State == stateRenting {
			j.State = stateRunning
		}
		j.step(stepRun, at)
	case stepOutput:
		if j.State == stateRenting || j.State == stateRunning {
			j.State = stateOutput
		}
		j.step(stepOutput, at)
	}
	_ = n.state.put(prefixJob, j.ID, j)
	n.mu.Unlock()
	if ev.Checkpoint != "" {
		c, err := cid.Decode(ev.Checkpoint)
		if err != nil {
			return nil, fmt.Errorf("checkpoint: %w", err)
		}
		// Pull it now, so that a provider that vanishes does not take the
		// last checkpoint with it.
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			n.pullCheckpoint(ev.Job, from, c, ev.N)
		}()
	}
	return struct{}{}, nil
}

func (n *Node) pullCheckpoint(job string, from peer.ID, c cid.Cid, num int) {
	ctx, cancel := context.WithTimeout(n.runCtx, n.cfg.OutputTimeout)
	defer cancel()
	reason := fmt.Sprintf("checkpoint %d of job %s", num, job)
	if _, err := n.exchange.Fetch(ctx, from, c, content.FetchOptions{Pin: reason, MaxBytes: n.cfg.MaxOutputBytes, Progress: n.metrics.returned()}); err != nil {
		n.log.Warn("pull checkpoint", "job", job, "n", num, "err", err)
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	j, ok := n.jobs[job]
	if !ok || num <= j.CheckpointN {
		// A newer checkpoint arrived first: this one is not kept.
		_ = n.store.Unpin(ctx, c, reason)
		return
	}
	if j.Checkpoint != "" {
		if old, err := cid.Decode(j.Checkpoint); err == nil {
			_ = n.store.Unpin(ctx, old, fmt.Sprintf("checkpoint %d of job %s", j.CheckpointN, job))
		}
	}
	j.Checkpoint, j.CheckpointN = c.String(), num
	_ = n.state.put(prefixJob, j.ID, j)
	n.log.Info("checkpoint pulled", "job", job, "n", num, "cid", c)
}

// handleOutput fetches and checks the whole output DAG, then acknowledges.
func (n *Node) handleOutput(ctx context.Context, from peer.ID, raw json.RawMessage) (any, error) {
	var req outputRequest
	if err := p2p.DecodeStrict(raw, &req); err != nil {
		return nil, err
	}
	c, err := cid.Decode(req.Output)
	if err != nil {
		return nil, fmt.Errorf("output: %w", err)
	}
	n.mu.Lock()
	_, err = n.leasedJob(req.Job, req.Lease, from)
	n.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if _, err := n.exchange.Fetch(ctx, from, c, content.FetchOptions{Pin: "output of job " + req.Job, MaxBytes: n.cfg.MaxOutputBytes, Progress: n.metrics.returned()}); err != nil {
		return nil, fmt.Errorf("fetch output %s: %w", c, err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	j, err := n.leasedJob(req.Job, req.Lease, from)
	if err != nil {
		return nil, err
	}
	j.Output = c.String()
	_ = n.state.put(prefixJob, j.ID, j)
	n.log.Info("output fetched", "job", j.ID, "cid", c)
	return struct{}{}, nil
}

// handleReceipt countersigns a receipt the provider signed, after checking
// that it describes this lease and continues the chain, and stores it.
func (n *Node) handleReceipt(ctx context.Context, from peer.ID, raw json.RawMessage) (any, error) {
	var req receiptRequest
	if err := p2p.DecodeStrict(raw, &req); err != nil {
		return nil, err
	}
	r, err := ledger.DecodeReceipt(req.Receipt)
	if err != nil {
		return nil, err
	}
	if r.Provider != from || r.Submitter != n.self {
		return nil, errors.New("receipt names other parties")
	}
	if err := r.Verify(); err != nil && !errors.Is(err, ledger.ErrUnsigned) {
		return nil, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	j, err := n.leasedJob(r.Job, r.Lease, from)
	if err != nil {
		return nil, err
	}
	if r.GPUs != len(j.Lease.Terms.GPUs) {
		return nil, fmt.Errorf("receipt counts %d GPUs, the lease %d", r.GPUs, len(j.Lease.Terms.GPUs))
	}
	signed := time.UnixMilli(j.Lease.Terms.Proposed)
	if r.HeldFrom.Before(signed.Add(-time.Minute)) || r.HeldUntil.After(time.Now().Add(time.Minute)) {
		return nil, errors.New("receipt claims time outside the lease")
	}
	// A final receipt that comes after this side gave the provider up (a
	// partition healed) is still countersigned: the provider held the GPUs
	// and ran the job all along. A provider's own restart is billed only
	// to the last time it saw the lease held (restart.go).
	prev, err := n.ledger.ByLease(ctx, r.Lease)
	if err != nil {
		return nil, err
	}
	if uint64(len(prev)) != r.Seq {
		// A retry of the last receipt (its reply was lost) gets the one
		// already countersigned: the provider adopts it and goes on from
		// there, so the chain never forks.
		if len(prev) > 0 && r.Seq == uint64(len(prev)-1) {
			last := prev[len(prev)-1].Receipt
			if last.Final {
				n.applyFinal(j, last)
				_ = n.state.put(prefixJob, j.ID, j)
			}
			return receiptReply{Receipt: mustJSON(last)}, nil
		}
		return nil, fmt.Errorf("receipt %d out of sequence (have %d)", r.Seq, len(prev))
	}
	if len(prev) > 0 && prev[len(prev)-1].Receipt.Digest() != r.Prev {
		return nil, errors.New("receipt does not continue the chain")
	}
	if err := r.Countersign(n.key); err != nil {
		return nil, err
	}
	if _, err := n.ledger.Append(ctx, r); err != nil {
		return nil, err
	}
	j.LastReceipt = time.Now()
	j.lastContact = j.LastReceipt
	if r.Final {
		n.applyFinal(j, r)
		if r.Outcome == ledger.OutcomeProviderLost {
			// A provider that restarted mid-run ends the lease itself.
			n.wg.Add(1)
			go func() {
				defer n.wg.Done()
				n.autoResume(n.runCtx, r.Job)
			}()
		}
	}
	_ = n.state.put(prefixJob, j.ID, j)
	n.metrics.receipts.Inc()
	return receiptReply{Receipt: mustJSON(r)}, nil
}

// applyFinal records a final receipt's ending on the job. The caller holds
// n.mu.
func (n *Node) applyFinal(j *jobRecord, r ledger.Receipt) {
	if j.State != stateReleased {
		n.log.Info("job released", "job", j.ID, "outcome", r.Outcome, "attribution", r.Attribution)
	}
	// The final receipt, signed by both, is the record: it replaces this
	// side's own verdict (a provider given up for lost during a partition
	// may come back with the job completed).
	j.State = stateReleased
	j.Outcome, j.Attribution, j.Reason, j.ExitCode = r.Outcome, r.Attribution, r.Reason, r.ExitCode
	if r.Checkpoint != "" && j.Checkpoint == "" {
		j.Checkpoint = r.Checkpoint
	}
	j.step(stepRelease, time.Now())
}

func stepAt(steps []api.Step, name string) time.Time {
	for _, s := range steps {
		if s.Step == name {
			return s.At
		}
	}
	return time.Time{}
}

func distinct(s []string) bool {
	seen := make(map[string]bool, len(s))
	for _, v := range s {
		if seen[v] {
			return false
		}
		seen[v] = true
	}
	return true
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only fixed, marshalable types reach here
	}
	return b
}

// withdraw withdraws one of this node's jobs: a queued job ends at once
// with nothing owed; a leased one is stopped by its provider and released
// with outcome withdrawn.
func (n *Node) withdraw(ctx context.Context, id string) (*jobRecord, error) {
	n.mu.Lock()
	j, ok := n.jobs[id]
	if !ok {
		n.mu.Unlock()
		return nil, fmt.Errorf("job %s: %w", id, errNotFound)
	}
	if j.terminal() {
		n.mu.Unlock()
		return nil, &httpError{code: http.StatusConflict, err: fmt.Errorf("job %s is already %s", id, j.State)}
	}
	var provider peer.ID
	var lease string
	if j.State == stateQueued {
		j.State = stateWithdrawn
		j.Outcome, j.Attribution = ledger.OutcomeWithdrawn, ledger.AttributionSubmitter
		j.Wait = ""
	} else {
		j.Withdrawn = true
		provider, _ = peer.Decode(j.Lease.Terms.Provider)
		lease = j.Lease.Terms.ID
	}
	err := n.state.put(prefixJob, id, j)
	out := *j
	n.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if _, err := n.gossip.Publish(ctx, p2p.TopicJobs, kindWithdrawal, withdrawalBody{Job: id}); err != nil {
		n.log.Warn("announce withdrawal", "job", id, "err", err)
	}
	if provider != "" {
		if err := n.call(ctx, provider, protoWithdraw, withdrawRequest{Lease: lease, Job: id}, nil); err != nil {
			n.log.Warn("tell provider of withdrawal", "job", id, "err", err)
		}
	}
	return &out, nil
}

// handleWithdraw stops a lease on its submitter's word.
func (n *Node) handleWithdraw(ctx context.Context, from peer.ID, raw json.RawMessage) (any, error) {
	var req withdrawRequest
	if err := p2p.DecodeStrict(raw, &req); err != nil {
		return nil, err
	}
	n.withdrawLease(req.Job, from)
	return struct{}{}, nil
}

// apiJob renders a job record for the API. The caller holds n.mu.
func apiJob(j *jobRecord) api.Job {
	out := api.Job{
		ID:          j.ID,
		Name:        j.Declaration.Name,
		State:       j.State,
		Outcome:     j.Outcome,
		Attribution: j.Attribution,
		Steps:       slices.Clone(j.Steps),
		ExitCode:    j.ExitCode,
		Output:      j.Output,
		Checkpoint:  j.Checkpoint,
		GPUs:        []string{},
		Reason:      j.Reason,
		Submitted:   j.Submitted.UTC(),
		ResumeOf:    j.ResumeOf,
	}
	for _, in := range j.Declaration.Data {
		out.Inputs = append(out.Inputs, in.Source)
	}
	if j.State == stateQueued {
		out.Reason = j.Wait
		if out.Reason == "" {
			out.Reason = "waiting for the next matching epoch"
		}
	}
	if j.Lease != nil {
		out.Provider = j.Lease.Terms.Provider
		out.Lease = j.Lease.Terms.ID
		out.GPUs = slices.Clone(j.Lease.Terms.GPUs)
	}
	if out.Steps == nil {
		out.Steps = []api.Step{}
	}
	return out
}
