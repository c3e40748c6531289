package node

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/exec"
	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/p2p"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Causes of a lease's run being stopped before it ended by itself.
var (
	errWithdrawn = errors.New("withdrawn by the submitter")
)

// activeLease is a lease this node provides that has not been released.
type activeLease struct {
	// receipts serialises receipt exchanges; it is taken before mu, and mu
	// is never held across a call to the submitter.
	receipts sync.Mutex
	mu       sync.Mutex // guards rec
	rec      *leaseRecord
	// cancel stops the lease's work with a cause (errWithdrawn, or the
	// node stopping).
	cancel context.CancelCauseFunc
}

// propose offers a lease for an assignment Match gave this node, unless the
// job already has a proposal in flight or one of the GPUs is taken.
func (n *Node) propose(ctx context.Context, a market.Assignment, epoch uint64, viewHash string) {
	oj, ok := n.view.job(a.Job)
	if !ok || n.runner == nil {
		return
	}
	n.mu.Lock()
	if n.proposing[a.Job] {
		n.mu.Unlock()
		return
	}
	for _, g := range a.GPUs {
		if n.held[g] != "" {
			n.mu.Unlock()
			return
		}
	}
	tentative := "proposal:" + a.Job
	for _, g := range a.GPUs {
		n.held[g] = tentative
	}
	n.proposing[a.Job] = true
	n.mu.Unlock()

	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		leased := n.proposeLease(ctx, a, oj, epoch, viewHash)
		n.mu.Lock()
		delete(n.proposing, a.Job)
		if !leased {
			// A declined or lapsed proposal frees its GPUs at once.
			for _, g := range a.GPUs {
				if n.held[g] == tentative {
					delete(n.held, g)
				}
			}
		}
		n.mu.Unlock()
	}()
}

func (n *Node) proposeLease(ctx context.Context, a market.Assignment, oj *openJob, epoch uint64, viewHash string) bool {
	now := time.Now()
	var nonce [8]byte
	_, _ = rand.Read(nonce[:])
	req := oj.body.Declaration.Request
	terms := LeaseTerms{
		ID:          leaseID(a.Job, n.self.String(), now.UnixMilli(), binary.BigEndian.Uint64(nonce[:])),
		Job:         a.Job,
		Provider:    n.self.String(),
		Submitter:   oj.submitter.String(),
		GPUs:        a.GPUs,
		CPUs:        req.CPUs,
		MemoryBytes: uint64(req.Memory),
		Limit:       req.Limit,
		Proposed:    now.UnixMilli(),
		Expires:     now.Add(n.cfg.ProposalTTL).UnixMilli(),
		Epoch:       epoch,
		ViewHash:    viewHash,
		Rank:        a.Rank,
	}
	sl := SignedLease{Terms: terms}
	if err := sl.signProvider(n.key); err != nil {
		n.log.Error("sign proposal", "err", err)
		return false
	}
	n.learnAddrsOnly(oj.submitter, oj.body.Addrs)
	cctx, cancel := context.WithTimeout(ctx, n.cfg.ProposalTTL)
	defer cancel()
	var rep proposeReply
	if err := n.call(cctx, oj.submitter, protoLease, proposeRequest{Lease: sl}, &rep); err != nil {
		n.log.Info("proposal not accepted", "job", a.Job, "err", err)
		var re *p2p.RemoteError
		if errors.As(err, &re) && strings.HasPrefix(re.Msg, declinedNotQueued) {
			// The submitter's word: the job is leased or over, whatever
			// this view missed (a partition, a lost announcement).
			n.view.closeJob(a.Job, oj.submitter, time.Now())
		}
		return false
	}
	sl.SubmitterSig = rep.SubmitterSig
	if err := sl.verify(true); err != nil {
		n.log.Warn("proposal countersignature invalid", "job", a.Job, "err", err)
		return false
	}
	rec := &leaseRecord{
		Lease:          sl,
		Declaration:    oj.body.Declaration,
		SubmitterAddrs: oj.body.Addrs,
		State:          leaseHeld,
		Start:          time.Now(),
	}
	for _, in := range oj.body.Declaration.Data {
		rec.Inputs = append(rec.Inputs, in.Source)
	}
	al := &activeLease{rec: rec}
	n.mu.Lock()
	for _, g := range terms.GPUs {
		n.held[g] = terms.ID
	}
	n.leases[terms.ID] = al
	err := n.state.put(prefixLease, terms.ID, rec)
	n.mu.Unlock()
	if err != nil {
		n.log.Error("persist lease", "lease", terms.ID, "err", err)
	}
	n.signalOfferChanged()
	if _, err := n.gossip.Publish(ctx, p2p.TopicJobs, kindLease, sl); err != nil {
		n.log.Warn("announce lease", "lease", terms.ID, "err", err)
	}
	n.metrics.leases.Inc()
	n.log.Info("lease signed", "lease", terms.ID, "job", a.Job, "submitter", oj.submitter, "gpus", len(terms.GPUs))
	n.startLease(al)
	return true
}

func (n *Node) signalOfferChanged() {
	select {
	case n.offerChanged <- struct{}{}:
	default:
	}
}

// startLease runs a lease's steps in the background.
func (n *Node) startLease(al *activeLease) {
	ctx, cancel := context.WithCancelCause(n.runCtx)
	al.mu.Lock()
	al.cancel = cancel
	t := al.rec.Lease.Terms
	al.mu.Unlock()
	n.mu.Lock()
	if w, ok := n.withdrawn[t.Job]; ok && w.by == t.Submitter {
		cancel(errWithdrawn) // withdrawn while the lease was being signed
	}
	n.mu.Unlock()
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		defer cancel(nil)
		n.runLease(ctx, al)
	}()
}

// withdrawLease stops the lease of a job this node provides, if any, on the
// submitter's word.
func (n *Node) withdrawLease(job string, by peer.ID) {
	// Collected first: a lease's lock is never taken under n.mu, because a
	// receipt exchange holds it while it calls into this node.
	n.mu.Lock()
	// Remembered too, for a lease whose run has not started yet:
	// startLease checks it.
	n.withdrawn[job] = withdrawal{by: by.String(), at: time.Now()}
	leases := make([]*activeLease, 0, len(n.leases))
	for _, al := range n.leases {
		leases = append(leases, al)
	}
	n.mu.Unlock()
	for _, al := range leases {
		al.mu.Lock()
		t := al.rec.Lease.Terms
		cancel := al.cancel
		al.mu.Unlock()
		if t.Job == job && t.Submitter == by.String() && cancel != nil {
			n.log.Info("withdrawal: stopping lease", "lease", t.ID, "job", job)
			cancel(errWithdrawn)
		}
	}
}

func (n *Node) leaseDir(id string) string { return filepath.Join(n.cfg.DataDir, "leases", id) }

// save persists a lease record; the caller holds al.mu.
func (n *Node) save(al *activeLease) {
	if err := n.state.put(prefixLease, al.rec.Lease.Terms.ID, al.rec); err != nil {
		n.log.Error("persist lease", "lease", al.rec.Lease.Terms.ID, "err", err)
	}
}

func (n *Node) setLeaseState(al *activeLease, state string, at time.Time) {
	al.mu.Lock()
	al.rec.State = state
	switch state {
	case leaseRunning:
		al.rec.RunStart = at
	case leaseOutput:
		al.rec.OutputStart = at
	}
	n.save(al)
	al.mu.Unlock()
}

// runLease carries a lease through staging, run and output to release.
// Every way out ends in release: nothing leaves compute held.
func (n *Node) runLease(ctx context.Context, al *activeLease) {
	al.mu.Lock()
	rec := al.rec
	t := rec.Lease.Terms
	decl := rec.Declaration
	al.mu.Unlock()
	submitter, _ := peer.Decode(t.Submitter)
	dir := n.leaseDir(t.ID)
	log := n.log.With("lease", t.ID, "job", t.Job)

	receiptsDone := make(chan struct{})
	rctx, stopReceipts := context.WithCancel(context.Background())
	go func() {
		defer close(receiptsDone)
		n.interimReceipts(rctx, al, submitter)
	}()

	end := func(outcome, attribution, reason string, exit *int) {
		al.mu.Lock()
		if al.rec.Outcome == "" {
			al.rec.Outcome, al.rec.Attribution, al.rec.Reason, al.rec.ExitCode = outcome, attribution, reason, exit
		}
		al.mu.Unlock()
	}

	// Staging: fetch every input completely, then lay it out for the mounts.
	n.setLeaseState(al, leaseStaging, time.Now())
	var inputs []exec.Mount
	stagingErr := func() error {
		for i, in := range decl.Data {
			c, err := cid.Decode(in.Source)
			if err != nil {
				return fmt.Errorf("data[%d].source: %w", i, err)
			}
			if _, err := n.exchange.Fetch(ctx, submitter, c, content.FetchOptions{Pin: "input of lease " + t.ID, Progress: n.metrics.staged()}); err != nil {
				return fmt.Errorf("fetch data[%d] %s: %w", i, c, err)
			}
			dst := filepath.Join(dir, "inputs", strconv.Itoa(i))
			_ = os.RemoveAll(dst)
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return err
			}
			if err := n.store.Export(ctx, c, dst, nil); err != nil {
				return fmt.Errorf("lay out data[%d]: %w", i, err)
			}
			inputs = append(inputs, exec.Mount{Source: dst, Target: in.Mount})
		}
		return nil
	}()

	var res exec.Result
	ran := false
	if stagingErr != nil {
		switch {
		case errors.Is(context.Cause(ctx), errWithdrawn):
			end(ledger.OutcomeWithdrawn, ledger.AttributionSubmitter, "withdrawn during staging", nil)
		case ctx.Err() != nil:
			end(ledger.OutcomeProviderLost, ledger.AttributionProvider, "provider stopped during staging", nil)
		default:
			log.Warn("staging failed", "err", stagingErr)
			end(ledger.OutcomeFailed, ledger.AttributionNetwork, "staging: "+stagingErr.Error(), nil)
		}
	} else {
		// Run.
		now := time.Now()
		n.setLeaseState(al, leaseRunning, now)
		n.sendEvent(submitter, eventRequest{Lease: t.ID, Job: t.Job, Step: stepRun, At: now.UnixMilli()})
		spec := exec.Spec{
			ID:          t.ID,
			Dir:         filepath.Join(dir, "run"),
			Command:     decl.Work.Command,
			Env:         decl.Work.Env,
			Inputs:      inputs,
			Output:      exec.Mount{Source: filepath.Join(dir, "out"), Target: decl.Output.Path},
			CPUs:        t.CPUs,
			MemoryBytes: t.MemoryBytes,
			Limit:       time.Duration(t.Limit) * time.Millisecond,
			Grace:       n.cfg.Grace,
			GPUs:        n.gpusByUUID(t.GPUs),
		}
		ckptDone := make(chan struct{})
		cctx, stopCkpt := context.WithCancel(context.Background())
		if cp := decl.Output.Checkpoints; cp != nil {
			spec.Checkpoint = &exec.Mount{Source: filepath.Join(dir, "ckpt"), Target: cp.Path}
			go func() {
				defer close(ckptDone)
				n.checkpointLoop(cctx, al, submitter, spec.Checkpoint.Source, time.Duration(cp.Every)*time.Millisecond)
			}()
		} else {
			close(ckptDone)
		}
		var err error
		res, err = n.runner.Run(ctx, spec)
		stopCkpt()
		<-ckptDone
		ran = true
		if spec.Checkpoint != nil {
			n.takeCheckpoint(context.Background(), al, submitter, spec.Checkpoint.Source)
		}
		switch {
		case err != nil:
			log.Warn("run could not start", "err", err)
			end(ledger.OutcomeFailed, ledger.AttributionProvider, err.Error(), nil)
		case res.Outcome == exec.Completed:
			end(ledger.OutcomeCompleted, ledger.AttributionJob, "", &res.ExitCode)
		case res.Outcome == exec.Failed:
			end(ledger.OutcomeFailed, ledger.AttributionJob, res.Reason, &res.ExitCode)
		case res.Outcome == exec.Limit:
			end(ledger.OutcomeLimit, ledger.AttributionJob, "limit "+time.Duration(spec.Limit).String()+" reached", &res.ExitCode)
		case errors.Is(context.Cause(ctx), errWithdrawn):
			end(ledger.OutcomeWithdrawn, ledger.AttributionSubmitter, "withdrawn while running", &res.ExitCode)
		default:
			end(ledger.OutcomeProviderLost, ledger.AttributionProvider, "provider stopped the run", &res.ExitCode)
		}
		log.Info("run ended", "outcome", res.Outcome, "exit", res.ExitCode, "reason", res.Reason)
	}

	// Output: the declared output path plus the logs, as one DAG.
	now := time.Now()
	n.setLeaseState(al, leaseOutput, now)
	n.sendEvent(submitter, eventRequest{Lease: t.ID, Job: t.Job, Step: stepOutput, At: now.UnixMilli()})
	if ran {
		if err := n.importOutput(context.Background(), al, submitter, dir, res); err != nil {
			log.Warn("output not imported", "err", err)
			al.mu.Lock()
			if al.rec.Outcome == ledger.OutcomeCompleted {
				al.rec.Outcome, al.rec.Attribution, al.rec.Reason = ledger.OutcomeOutputLost, ledger.AttributionProvider, err.Error()
			}
			al.mu.Unlock()
		} else if err := n.deliverOutput(n.runCtx, al, submitter, n.cfg.OutputTimeout); err != nil {
			// The submitter is away: the GPUs go back now and the output
			// waits, pinned, for it to return (see settle).
			log.Info("output waits for the submitter", "err", err)
		}
	}

	// Release.
	stopReceipts()
	<-receiptsDone
	n.release(al, time.Now())
	if n.runner != nil {
		if err := n.runner.Cleanup(context.Background(), t.ID, filepath.Join(dir, "run")); err != nil {
			log.Warn("cleanup", "err", err)
		}
	}
	_ = os.RemoveAll(dir)
	n.settle(n.runCtx, al, submitter)
}

func (n *Node) gpusByUUID(uuids []string) []exec.GPU {
	var out []exec.GPU
	for _, u := range uuids {
		for _, g := range n.gpus {
			if g.UUID == u {
				out = append(out, g)
			}
		}
	}
	return out
}

// sendEvent tells the submitter of a step, in the background so that an
// absent submitter does not slow the lease; best effort, the receipts carry
// the phases anyway.
func (n *Node) sendEvent(to peer.ID, ev eventRequest) {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		ctx, cancel := context.WithTimeout(n.runCtx, 10*time.Second)
		defer cancel()
		if err := n.call(ctx, to, protoEvent, ev, nil); err != nil {
			n.log.Debug("event not delivered", "lease", ev.Lease, "step", ev.Step, "err", err)
		}
	}()
}

// checkpointLoop imports the checkpoint folder every interval while the job
// runs, and announces each new one to the submitter.
func (n *Node) checkpointLoop(ctx context.Context, al *activeLease, submitter peer.ID, dir string, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			n.takeCheckpoint(ctx, al, submitter, dir)
		}
	}
}

// takeCheckpoint imports dir if it holds something new, pins it and hands
// it to the submitter, who pulls it at once.
func (n *Node) takeCheckpoint(ctx context.Context, al *activeLease, submitter peer.ID, dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) == 0 {
		return
	}
	al.mu.Lock()
	id := al.rec.Lease.Terms.ID
	job := al.rec.Lease.Terms.Job
	num := al.rec.CheckpointN + 1
	prev := al.rec.Checkpoint
	al.mu.Unlock()
	c, _, err := n.store.Import(ctx, dir, content.ImportOptions{Pin: fmt.Sprintf("checkpoint %d of lease %s", num, id)})
	if err != nil {
		n.log.Warn("import checkpoint", "lease", id, "err", err)
		return
	}
	if c.String() == prev {
		_ = n.store.Unpin(ctx, c, fmt.Sprintf("checkpoint %d of lease %s", num, id))
		return
	}
	n.allow(submitter, c)
	al.mu.Lock()
	al.rec.Checkpoint, al.rec.CheckpointN = c.String(), num
	n.save(al)
	al.mu.Unlock()
	n.sendEvent(submitter, eventRequest{Lease: id, Job: job, Checkpoint: c.String(), N: num, At: time.Now().UnixMilli()})
}

// importOutput imports the output folder and the logs as one DAG, pinned
// for the submitter to fetch.
func (n *Node) importOutput(ctx context.Context, al *activeLease, submitter peer.ID, dir string, res exec.Result) error {
	al.mu.Lock()
	t := al.rec.Lease.Terms
	al.mu.Unlock()
	result := filepath.Join(dir, "result")
	_ = os.RemoveAll(result)
	if err := os.MkdirAll(result, 0o755); err != nil {
		return err
	}
	out := filepath.Join(dir, "out")
	if _, err := os.Stat(out); err == nil {
		if err := os.Rename(out, filepath.Join(result, "out")); err != nil {
			return err
		}
	} else if err := os.Mkdir(filepath.Join(result, "out"), 0o755); err != nil {
		return err
	}
	for _, l := range []struct{ src, name string }{{res.Stdout, "stdout.log"}, {res.Stderr, "stderr.log"}} {
		b, err := os.ReadFile(l.src)
		if err != nil {
			b = nil
		}
		if err := os.WriteFile(filepath.Join(result, l.name), b, 0o644); err != nil {
			return err
		}
	}
	c, _, err := n.store.Import(ctx, result, content.ImportOptions{Pin: "output of lease " + t.ID})
	if err != nil {
		return fmt.Errorf("import output: %w", err)
	}
	n.allow(submitter, c)
	al.mu.Lock()
	al.rec.Output = c.String()
	n.save(al)
	al.mu.Unlock()
	return nil
}

// deliverOutput hands the output's CID to the submitter, who fetches and
// checks it before it answers, retrying with backoff for up to patience.
func (n *Node) deliverOutput(ctx context.Context, al *activeLease, submitter peer.ID, patience time.Duration) error {
	al.mu.Lock()
	t := al.rec.Lease.Terms
	out := al.rec.Output
	acked := !al.rec.OutputAcked.IsZero()
	al.mu.Unlock()
	if out == "" || acked {
		return nil
	}
	// With patience, every attempt ends by the deadline too: the GPUs are
	// held only that long. Without, one attempt may take the whole output
	// timeout, since the submitter answers only once it has the output.
	deadline := time.Now().Add(patience)
	attemptEnd := deadline
	if patience == 0 {
		attemptEnd = time.Now().Add(n.cfg.OutputTimeout)
	}
	backoff := 500 * time.Millisecond
	for {
		cctx, cancel := context.WithDeadline(ctx, attemptEnd)
		err := n.call(cctx, submitter, protoOutput, outputRequest{Lease: t.ID, Job: t.Job, Output: out}, nil)
		cancel()
		if err == nil {
			al.mu.Lock()
			al.rec.OutputAcked = time.Now()
			n.save(al)
			al.mu.Unlock()
			return nil
		}
		if ctx.Err() != nil || !time.Now().Add(backoff).Before(deadline) {
			return fmt.Errorf("hand output %s to the submitter: %w", out, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 10*time.Second)
	}
}

// settle finishes what release leaves when the submitter is away: handing
// over the output and the final receipt. It retries, with backoff, for the
// retention window; past it the output is unpinned and the lease closed
// without a countersigned final receipt (its interim receipts stand).
func (n *Node) settle(ctx context.Context, al *activeLease, submitter peer.ID) {
	al.mu.Lock()
	id := al.rec.Lease.Terms.ID
	until := al.rec.End.Add(n.cfg.Retention)
	al.mu.Unlock()
	backoff := 500 * time.Millisecond
	for {
		al.mu.Lock()
		announced, body := al.rec.ReleaseAnnounced, releaseOf(al.rec)
		al.mu.Unlock()
		if !announced {
			n.announceRelease(al, body)
		}
		err := n.deliverOutput(ctx, al, submitter, 0)
		if err == nil {
			if err = n.exchangeReceipt(ctx, al, submitter, true); err == nil || errors.Is(err, errFinalDone) {
				n.log.Info("lease settled", "lease", id)
				return
			}
		}
		if ctx.Err() != nil {
			return
		}
		if time.Now().After(until) {
			n.log.Warn("submitter never came back: giving up the lease's output", "lease", id, "err", err)
			al.mu.Lock()
			if c, cerr := cid.Decode(al.rec.Output); cerr == nil {
				_ = n.store.Unpin(context.Background(), c, "output of lease "+id)
			}
			al.rec.FinalSigned = true // nothing more can be signed
			al.rec.Reason = "submitter did not return within the retention window"
			n.save(al)
			al.mu.Unlock()
			return
		}
		n.log.Debug("lease not settled yet", "lease", id, "retry_in", backoff, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, time.Minute)
	}
}

// announceRelease publishes a lease's release and records that it did;
// settle tries again for a release that could not be published.
func (n *Node) announceRelease(al *activeLease, body releaseBody) {
	if _, err := n.gossip.Publish(n.runCtx, p2p.TopicJobs, kindRelease, body); err != nil {
		n.log.Warn("announce release", "lease", body.Lease, "err", err)
		return
	}
	al.mu.Lock()
	al.rec.ReleaseAnnounced = true
	n.save(al)
	al.mu.Unlock()
}

// releaseOf is the release announcement of a released lease.
func releaseOf(rec *leaseRecord) releaseBody {
	t := rec.Lease.Terms
	return releaseBody{
		Lease: t.ID, Job: t.Job, Provider: t.Provider, Submitter: t.Submitter, GPUs: t.GPUs,
		Outcome: rec.Outcome, Attribution: rec.Attribution,
		HeldMs: rec.End.Sub(rec.Start).Milliseconds(), At: rec.End.UnixMilli(),
	}
}

// errFinalDone says the final receipt was already exchanged.
var errFinalDone = errors.New("final receipt already signed")

// interimReceipts signs a receipt every interval while compute is held.
func (n *Node) interimReceipts(ctx context.Context, al *activeLease, submitter peer.ID) {
	t := time.NewTicker(n.cfg.ReceiptInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			al.mu.Lock()
			al.rec.LastAlive = now
			n.save(al)
			al.mu.Unlock()
			if err := n.exchangeReceipt(ctx, al, submitter, false); err != nil {
				n.log.Warn("interim receipt", "lease", al.rec.Lease.Terms.ID, "err", err)
			}
		}
	}
}

func phaseOf(state string) string {
	switch state {
	case leaseRunning:
		return ledger.PhaseRun
	case leaseOutput, leaseReleased:
		return ledger.PhaseOutput
	}
	return ledger.PhaseStaging
}

// exchangeReceipt signs the next receipt, has the submitter countersign it
// and stores it. The caller must not hold al.mu.
func (n *Node) exchangeReceipt(ctx context.Context, al *activeLease, submitter peer.ID, final bool) error {
	// Receipts of a lease go one at a time (each links to the last), but
	// the lease's state lock is not held while the submitter answers: a
	// submitter that is slow or gone must not stall the run.
	al.receipts.Lock()
	defer al.receipts.Unlock()
	al.mu.Lock()
	rec := al.rec
	if rec.FinalSigned {
		al.mu.Unlock()
		return errFinalDone
	}
	now := time.Now()
	if final {
		// Never before a receipt already signed: after a crash the end
		// may have been estimated short of the last interim receipt.
		if rec.LastAlive.After(rec.End) {
			rec.End = rec.LastAlive
		}
		now = rec.End
	}
	r := ledger.Receipt{
		Lease:     rec.Lease.Terms.ID,
		Job:       rec.Lease.Terms.Job,
		Provider:  n.self,
		Submitter: submitter,
		GPUs:      len(rec.Lease.Terms.GPUs),
		Seq:       rec.Seq,
		Final:     final,
		HeldFrom:  rec.Start,
		HeldUntil: now,
		Phase:     phaseOf(rec.State),
		Prev:      rec.Prev,
	}
	if final {
		r.Outcome, r.Attribution, r.ExitCode, r.Reason = rec.Outcome, rec.Attribution, rec.ExitCode, rec.Reason
		r.Output, r.Checkpoint = rec.Output, rec.Checkpoint
		r.Phases = phases(rec)
		if !rec.OutputAcked.IsZero() && !rec.OutputStart.IsZero() {
			r.OutputWait = rec.OutputAcked.Sub(rec.OutputStart).Seconds()
		}
	}
	al.mu.Unlock()
	if err := r.SignProvider(n.key); err != nil {
		return err
	}
	raw, err := json.Marshal(r)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	var rep receiptReply
	if err := n.call(cctx, submitter, protoReceipt, receiptRequest{Receipt: raw}, &rep); err != nil {
		return fmt.Errorf("countersign receipt %d: %w", r.Seq, err)
	}
	cr, err := ledger.DecodeReceipt(rep.Receipt)
	if err != nil {
		return fmt.Errorf("countersigned receipt: %w", err)
	}
	adopted := false
	if string(cr.SigningBytes()) != string(r.SigningBytes()) {
		// The submitter answered a retry with the receipt of this seq it
		// countersigned before (our earlier reply was lost): it carries our
		// own signature, so we adopt it and go on from it.
		if cr.Lease != r.Lease || cr.Seq != r.Seq || cr.Provider != n.self || cr.Verify() != nil {
			return errors.New("the submitter countersigned a different receipt")
		}
		adopted = true
	}
	// Stored whatever happens to ctx now: the submitter has countersigned
	// and stored it, and the chain must not go on without it here.
	if _, err := n.ledger.Append(context.Background(), cr); err != nil {
		return fmt.Errorf("store receipt: %w", err)
	}
	n.metrics.receipts.Inc()
	al.mu.Lock()
	defer al.mu.Unlock()
	rec.Seq++
	rec.Prev = cr.Digest()
	if cr.HeldUntil.After(rec.LastAlive) {
		rec.LastAlive = cr.HeldUntil
	}
	if cr.Final {
		rec.FinalSigned = true
	}
	n.save(al)
	if adopted && final && !cr.Final {
		return errors.New("adopted an earlier interim receipt; the final one follows")
	}
	return nil
}

// phases splits held time into staging, run and output, in seconds.
func phases(rec *leaseRecord) ledger.Phases {
	var p ledger.Phases
	end := rec.End
	runStart, outStart := rec.RunStart, rec.OutputStart
	if outStart.IsZero() {
		outStart = end
	}
	if runStart.IsZero() {
		runStart = outStart
	}
	p.Staging = runStart.Sub(rec.Start).Seconds()
	p.Run = outStart.Sub(runStart).Seconds()
	p.Output = end.Sub(outStart).Seconds()
	return p
}

// release ends a lease: the meter stops, the GPUs go back into the offer
// and the release is announced. The final receipt follows (settle).
func (n *Node) release(al *activeLease, end time.Time) {
	al.mu.Lock()
	al.rec.End = end
	al.rec.State = leaseReleased
	n.save(al)
	t := al.rec.Lease.Terms
	al.mu.Unlock()

	// The GPUs go back first: the final receipt's countersignature may take
	// a while, and nothing runs on them any more.
	n.mu.Lock()
	for _, g := range t.GPUs {
		if n.held[g] == t.ID {
			delete(n.held, g)
		}
	}
	delete(n.leases, t.ID)
	n.mu.Unlock()
	n.signalOfferChanged()

	al.mu.Lock()
	body := releaseOf(al.rec)
	al.mu.Unlock()
	n.announceRelease(al, body)
	n.log.Info("lease released", "lease", t.ID, "outcome", body.Outcome, "held", time.Duration(body.HeldMs)*time.Millisecond)
}
