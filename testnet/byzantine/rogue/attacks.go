package rogue

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/node/task"
	"github.com/e31network/e31/node/wire"
	"github.com/ipfs/go-cid"
)

// The attacks of a rogue provider on an honest submitter, in the order
// of issue 51. Each returns what happened; an error only says the attack
// could not be carried out.

// epoch1970 is the Unix epoch, the earliest time a receipt may name.
var epoch1970 = time.UnixMilli(0)

// Backdated proposes, with no offer of its own, a lease for an honest
// queued job dated 1970 and expiring a proposal's lifetime from now; if
// the submitter countersigns it, the rogue bills a receipt held from 1970
// until now.
func (r *Rogue) Backdated(ctx context.Context, job string) (Result, error) {
	res := Result{Attack: AttackBackdated}
	j, err := r.WaitJob(ctx, job)
	if err != nil {
		return res, err
	}
	l, err := r.Propose(ctx, j, Terms{Proposed: epoch1970, Expires: time.Now().Add(r.cfg.ProposalTTL)})
	res.Steps = append(res.Steps, stepOf("proposal dated 1970", err, Countersigned))
	if err != nil {
		return res, nil
	}
	a := l.Receipt(ctx, ReceiptSpec{HeldFrom: epoch1970})
	res.Steps = append(res.Steps, receiptStep("receipt held from 1970", a))
	res.claimed(a)
	return res, nil
}

// NoOffer proposes, with no offer of its own, a lease for an honest
// queued job, on sane terms: proposed now.
func (r *Rogue) NoOffer(ctx context.Context, job string) (Result, error) {
	return r.proposeOnly(ctx, AttackNoOffer, "proposal without an offer", job)
}

// NotAssigned proposes a lease for an honest job as soon as its
// declaration arrives, on sane terms and GPUs of the rogue's own offer,
// which fits the job, though Match assigned the job to another provider
// (one that fits better, or that it is reserved to).
func (r *Rogue) NotAssigned(ctx context.Context, job string) (Result, error) {
	if _, ok := r.offerNow(); !ok {
		return Result{Attack: AttackNotAssigned}, fmt.Errorf("rogue: %s needs an offer", AttackNotAssigned)
	}
	return r.proposeOnly(ctx, AttackNotAssigned, "proposal for a job Match gave another", job)
}

func (r *Rogue) proposeOnly(ctx context.Context, attack, what, job string) (Result, error) {
	res := Result{Attack: attack}
	j, err := r.WaitJob(ctx, job)
	if err != nil {
		return res, err
	}
	_, err = r.Propose(ctx, j, Terms{})
	res.Steps = append(res.Steps, stepOf(what, err, Countersigned))
	return res, nil
}

// Take waits for the declaration of job and proposes a lease for it on
// sane terms, as the one provider whose offer fits: the genuine lease the
// receipt and outcome attacks need. It is an error if the submitter does
// not countersign.
func (r *Rogue) Take(ctx context.Context, job string) (*Lease, error) {
	j, err := r.WaitJob(ctx, job)
	if err != nil {
		return nil, err
	}
	l, err := r.Propose(ctx, j, Terms{})
	if err != nil {
		return nil, fmt.Errorf("rogue: no lease of job %s to attack: %w", job, err)
	}
	return l, nil
}

// PastLimit sends, under a genuine lease, a receipt held from 1970 until
// now and one held from the lease's start until ten times its limit past
// it: time the lease cannot have held.
func (r *Rogue) PastLimit(ctx context.Context, l *Lease) Result {
	res := Result{Attack: AttackPastLimit}
	a := l.Receipt(ctx, ReceiptSpec{HeldFrom: epoch1970})
	res.Steps = append(res.Steps, receiptStep("receipt held from 1970", a))
	res.claimed(a)
	a = l.Receipt(ctx, ReceiptSpec{HeldUntil: l.Proposed().Add(10 * l.Limit())})
	res.Steps = append(res.Steps, receiptStep("receipt held to 10× the limit", a))
	res.claimed(a)
	return res
}

// AfterFinal ends a genuine lease with an honest final receipt (the job
// failed, exit status 1), then sends an interim receipt after it, the
// next in the chain.
func (r *Rogue) AfterFinal(ctx context.Context, l *Lease) (Result, error) {
	res := Result{Attack: AttackAfterFinal}
	exit := 1
	a := l.Receipt(ctx, ReceiptSpec{Final: true, Outcome: ledger.OutcomeFailed, Attribution: ledger.AttributionJob, ExitCode: &exit, Reason: "exit status 1"})
	res.Steps = append(res.Steps, receiptStep("final receipt", a))
	if !a.Countersigned {
		return res, fmt.Errorf("rogue: the final receipt of lease %s was not countersigned (%s): nothing to send after it", l.ID(), res.Summary())
	}
	a = l.Receipt(ctx, ReceiptSpec{})
	res.Steps = append(res.Steps, receiptStep("interim receipt after it", a))
	res.claimed(a)
	return res, nil
}

// stageFetchTimeout bounds each fetch of an input StageUnreserved tries:
// a refused bitswap want is not answered, only never served.
const stageFetchTimeout = 5 * time.Second

// StageUnreserved asks to stage a queued honest job it was neither leased
// nor reserved (wire.ProtoStage), then fetches each of the job's inputs
// from its submitter, over the bulk protocol and, failing that, bitswap,
// whatever the answer: Bytes is what it obtained.
func (r *Rogue) StageUnreserved(ctx context.Context, job string) (Result, error) {
	res := Result{Attack: AttackStage}
	j, err := r.WaitJob(ctx, job)
	if err != nil {
		return res, err
	}
	var rep wire.StageReply
	err = r.call(ctx, j.Submitter, wire.ProtoStage, wire.StageRequest{Job: j.ID}, &rep)
	res.Steps = append(res.Steps, stepOf("stage request", answerErr2(err), Accepted))
	var roots []cid.Cid
	for _, in := range j.Body.Declaration.Data {
		if c, err := cid.Decode(in.Source); err == nil {
			roots = append(roots, c)
		}
	}
	if len(roots) == 0 {
		return res, fmt.Errorf("rogue: job %s has no input to fetch", j.ID)
	}
	for _, c := range roots {
		fctx, cancel := context.WithTimeout(ctx, stageFetchTimeout)
		st, err := r.ex.Fetch(fctx, j.Submitter, c, content.FetchOptions{})
		cancel()
		res.Bytes += st.BytesFetched
		res.Steps = append(res.Steps, fetchStep("bulk fetch of the input", err))
		if err == nil {
			continue
		}
		fctx, cancel = context.WithTimeout(ctx, stageFetchTimeout)
		st, err = r.ex.FetchBitswap(fctx, j.Submitter, c, content.FetchOptions{})
		cancel()
		res.Bytes += st.BytesFetched
		res.Steps = append(res.Steps, fetchStep("bitswap fetch of the input", err))
	}
	res.note("%s of the input obtained", bytesText(res.Bytes))
	return res, nil
}

// fetchStep names how a fetch went: obtained, or refused (a refused
// fetch carries no wire code: the content protocols have none).
func fetchStep(what string, err error) Step {
	if err == nil {
		return Step{What: what, Answer: Accepted}
	}
	return Step{What: what, Answer: Refused, Err: err.Error()}
}

// answerErr2 is answerErr for an error that may be nil.
func answerErr2(err error) error {
	if err == nil {
		return nil
	}
	return answerErr(err)
}

// FalseCompleted ends a genuine lease with a final receipt that says the
// job completed and names an output the rogue never handed over.
func (r *Rogue) FalseCompleted(ctx context.Context, l *Lease) (Result, error) {
	res := Result{Attack: AttackFalseCompleted}
	out, err := r.importRandom(ctx, 64<<10, 1)
	if err != nil {
		return res, err
	}
	// A run like any other until its end: its first receipt.
	a := l.Receipt(ctx, ReceiptSpec{})
	res.Steps = append(res.Steps, receiptStep("interim receipt", a))
	exit := 0
	a = l.Receipt(ctx, ReceiptSpec{Final: true, Outcome: ledger.OutcomeCompleted, Attribution: ledger.AttributionJob, ExitCode: &exit, Output: out.String()})
	res.Steps = append(res.Steps, receiptStep("final receipt: completed, output never handed over", a))
	return res, nil
}

// FalseCheckpointAt ends a genuine lease with a final receipt that says
// it was preempted and that the run's work was kept up to its end, at a
// checkpoint for which it never sent an event (a DAG it holds and would
// serve): the policy charges a preempted lease up to its last
// checkpoint.
func (r *Rogue) FalseCheckpointAt(ctx context.Context, l *Lease) (Result, error) {
	res := Result{Attack: AttackFalseCheckpoint}
	ck, err := r.importRandom(ctx, 64<<10, 2)
	if err != nil {
		return res, err
	}
	a := l.Receipt(ctx, ReceiptSpec{})
	res.Steps = append(res.Steps, receiptStep("interim receipt", a))
	now := time.Now()
	a = l.Receipt(ctx, ReceiptSpec{Final: true, HeldUntil: now, Outcome: ledger.OutcomePreempted, Attribution: ledger.AttributionProvider,
		Reason: "preempted", Checkpoint: ck.String(), CheckpointAt: now})
	res.Steps = append(res.Steps, receiptStep("final receipt: preempted, checkpoint_at with no checkpoint event", a))
	return res, nil
}

// FloodOptions shape a checkpoint flood.
type FloodOptions struct {
	// Events is how many checkpoint events go at once; default 100.
	Events int
	// DAGs is how many distinct checkpoints they name, in turn; default 4.
	DAGs int
	// DAGBytes is each checkpoint's size; default 96 MiB.
	DAGBytes int64
	// Burst is how many events are in flight at once; default 32, which
	// libp2p's limits on one peer's streams let through whole.
	Burst int
	// Settle bounds the wait, after the last event is answered, for the
	// submitter's pulls to end; default 2m.
	Settle time.Duration
}

func (o FloodOptions) withDefaults() FloodOptions {
	orDefault(&o.Events, 100)
	orDefault(&o.DAGs, 4)
	orDefault(&o.DAGBytes, 96<<20)
	orDefault(&o.Burst, 32)
	orDefault(&o.Settle, 2*time.Minute)
	return o
}

// quietFor is how long no pull may be open before a flood's pulls count
// as over.
const quietFor = 2 * time.Second

// CheckpointFlood sends, under a genuine lease, o.Events checkpoint
// events in a burst (o.Burst at once), their numbers shuffled, naming
// DAGs (of its own, which it serves) larger than the job may write, and
// waits for the submitter's pulls to end. Bytes is what the rogue served
// the submitter, Concurrent the most pulls it served at once.
func (r *Rogue) CheckpointFlood(ctx context.Context, l *Lease, o FloodOptions) (Result, error) {
	o = o.withDefaults()
	res := Result{Attack: AttackCheckpointFlood}
	// The run has started, as a provider says once its first receipt
	// goes (a submitter may well refuse checkpoints before), and goes on
	// with a receipt every interval while the flood lasts.
	a := l.Receipt(ctx, ReceiptSpec{})
	res.Steps = append(res.Steps, receiptStep("interim receipt", a))
	alive, stopAlive := context.WithCancel(ctx)
	defer stopAlive()
	go l.KeepAlive(alive, ledger.PhaseRun)
	dags := make([]cid.Cid, o.DAGs)
	for i := range dags {
		c, err := r.importRandom(ctx, o.DAGBytes, uint64(100+i))
		if err != nil {
			return res, err
		}
		dags[i] = c
	}
	served0 := r.Served(l.Submitter)
	nums := rand.New(rand.NewPCG(51, 8)).Perm(o.Events)
	watch, stopWatch := context.WithCancel(ctx)
	peak := make(chan int, 1)
	go func() { peak <- r.peakPulls(watch, l) }()
	steps := make([]Step, o.Events)
	var wg sync.WaitGroup
	inFlight := make(chan struct{}, o.Burst)
	for i := range o.Events {
		inFlight <- struct{}{}
		wg.Go(func() {
			defer func() { <-inFlight }()
			err := l.Event(ctx, wire.EventRequest{At: time.Now().UnixMilli(), Checkpoint: dags[i%len(dags)].String(), N: nums[i] + 1})
			steps[i] = stepOf("checkpoint event", err, Accepted)
		})
	}
	wg.Wait()
	res.Steps = append(res.Steps, steps...)
	err := r.awaitQuiet(ctx, l, o.Settle)
	stopWatch()
	most := <-peak
	res.Bytes = r.Served(l.Submitter) - served0
	res.Concurrent = most
	res.note("checkpoints of %s each, the job's disk %s", bytesText(o.DAGBytes), bytesText(int64(l.Job.Request().DiskBytes())))
	res.note("%s served to the submitter, at most %d pulls at a time", bytesText(res.Bytes), most)
	return res, err
}

// bulkStreams counts the bulk-protocol streams open between the rogue and
// the lease's submitter: each is one round of one pull.
func (r *Rogue) bulkStreams(l *Lease) int {
	n := 0
	for _, c := range r.h.Network().ConnsToPeer(l.Submitter) {
		for _, s := range c.GetStreams() {
			if s.Protocol() == content.ProtocolBulk {
				n++
			}
		}
	}
	return n
}

// peakPulls is the most bulk streams open at once with the lease's
// submitter until ctx ends, looked at every few milliseconds.
func (r *Rogue) peakPulls(ctx context.Context, l *Lease) int {
	most := 0
	for ctx.Err() == nil {
		most = max(most, r.bulkStreams(l))
		_ = task.Sleep(ctx, 5*time.Millisecond)
	}
	return most
}

// awaitQuiet waits until no pull of the lease's submitter has been open
// for quietFor, or within.
func (r *Rogue) awaitQuiet(ctx context.Context, l *Lease, within time.Duration) error {
	deadline := time.Now().Add(within)
	quietSince := time.Now()
	for {
		if r.bulkStreams(l) > 0 {
			quietSince = time.Now()
		}
		if time.Since(quietSince) >= quietFor {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("rogue: the submitter still pulls checkpoints %s after the flood", within)
		}
		if err := task.Sleep(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
}

// importRandom stores a DAG of one file of size bytes, random from seed
// (so that no block repeats and nothing is stored or fetched twice), and
// returns its root.
func (r *Rogue) importRandom(ctx context.Context, size int64, seed uint64) (cid.Cid, error) {
	// Seeded by the rogue's identity too: two rogues' DAGs never share
	// a block.
	key := sha256.Sum256(fmt.Appendf(nil, "%s|%d", r.self, seed))
	f := content.TreeFile{Path: "data", Size: size, Open: func(context.Context) (io.ReadCloser, error) {
		return io.NopCloser(io.LimitReader(rand.NewChaCha8(key), size)), nil
	}}
	c, _, err := r.store.ImportTree(ctx, []content.TreeFile{f}, content.ImportOptions{Pin: "rogue"})
	if err != nil {
		return cid.Undef, fmt.Errorf("rogue: import %s: %w", bytesText(size), err)
	}
	return c, nil
}

// claimed adds what a countersigned receipt claims to the result: the
// most GPU-hours one receipt of the attack got countersigned (receipts
// are cumulative, so they are not summed).
func (res *Result) claimed(a Answer) {
	if a.Countersigned {
		res.GPUHours = max(res.GPUHours, a.GPUHours())
	}
}

// bytesText writes a byte count in MiB or KiB.
func bytesText(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
