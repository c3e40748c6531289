package submitter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/e31network/e31/exec/gpuprobe"
	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
)

// The GPU probe at the start of a lease: before the run, the provider runs
// the probe on the leased GPUs inside the sandbox and sends what it saw
// (wire.ProtoProbe). This node compares it with the offer the lease was
// made on. A result that differs is refused with wire.CodeProbeFailed: the
// provider ends the lease failed, its own doing, and this node
// countersigns only that final receipt (nothing of it is owed), announces
// the release as requeued and puts the job back in the queue avoiding the
// provider. Until that receipt comes the lease's output is refused; a
// provider that never sends it is given up by the watches every lease has
// (avoid.go).

// RecordProbe is a GPU probe this node refused.
type RecordProbe struct {
	// ProbeLease is the lease whose probe failed, and ProbeFailed why
	// (it begins with ledger.ReasonGPUProbe).
	ProbeLease  string `json:"probe_lease,omitempty"`
	ProbeFailed string `json:"probe_failed,omitempty"`
}

// ProbeJudge answers providers' GPU probe results (wire.ProtoProbe) for
// a Submitter's jobs.
type ProbeJudge struct {
	s *Submitter // immutable
}

// JudgeProbes is the judge of the GPU probes of s's leases.
func JudgeProbes(s *Submitter) ProbeJudge { return ProbeJudge{s: s} }

// probePhase is a job's GPU probe, once judged.
type probePhase struct{ *jobTracker }

// Handle judges a provider's GPU probe result against its offer.
func (pj ProbeJudge) Handle(_ context.Context, from peer.ID, raw json.RawMessage) (any, error) {
	s := pj.s
	var req wire.ProbeRequest
	if err := p2p.DecodeStrict(raw, &req); err != nil {
		return nil, err
	}
	if err := req.Check(); err != nil {
		return nil, err
	}
	j, err := s.jobs.leased(req.Job, req.Lease, from)
	if err != nil {
		return nil, err
	}
	var leased []string
	var want market.Request
	j.view(func(r *Record) {
		leased = slices.Clone(r.Lease.Terms.GPUs)
		want = r.Declaration.Request
	})
	var offer *market.Offer
	if e, ok := s.d.Offers.Get(from.String()); ok {
		offer = &e.Offer
	}
	why := probeMismatch(req, leased, offer, want)
	if why == "" {
		return struct{}{}, nil
	}
	reason := ledger.ReasonGPUProbe + ": " + why
	j.change(func(r *Record) error {
		if r.Lease == nil || r.Lease.Terms.ID != req.Lease {
			return errSkip
		}
		r.ProbeLease, r.ProbeFailed = req.Lease, reason
		return nil
	})
	j.log.Warn("GPU probe failed: the provider's GPUs are not what it offered", "job", req.Job, "lease", req.Lease, "provider", from, "why", why)
	return nil, p2p.Refuse(wire.CodeProbeFailed, errors.New(reason))
}

// probeMismatch says how a probe result differs from the lease's GPUs
// (leased), their offer (nil when this node holds none any more: then the
// declared gpu_model and gpu_memory stand in) and the request, or "" when
// it agrees. Every difference is named, in the order of the GPUs.
func probeMismatch(req wire.ProbeRequest, leased []string, offer *market.Offer, want market.Request) string {
	var problems []string
	if req.Error != "" {
		problems = append(problems, "the probe failed: "+req.Error)
	}
	if len(req.GPUs) != len(leased) {
		problems = append(problems, fmt.Sprintf("probed %d GPUs, the lease holds %d", len(req.GPUs), len(leased)))
	}
	seen := make([]string, 0, len(req.GPUs))
	for _, g := range req.GPUs {
		seen = append(seen, g.UUID)
		if !slices.Contains(leased, g.UUID) {
			problems = append(problems, fmt.Sprintf("probed %s, which is not leased", g.UUID))
			continue
		}
		model, mem := want.GPUModel, uint64(want.GPUMemory)
		if offer != nil {
			if o, ok := offered(*offer, g.UUID); ok {
				model, mem = o.Model, o.MemoryBytes
			}
		}
		problems = append(problems, probedGPUMismatch(g, model, mem)...)
	}
	for _, u := range leased {
		if !slices.Contains(seen, u) {
			problems = append(problems, fmt.Sprintf("leased %s was not probed", u))
		}
	}
	return strings.Join(problems, "; ")
}

// probedGPUMismatch compares one probed GPU with the model and memory it
// was offered as.
func probedGPUMismatch(g wire.ProbedGPU, model string, mem uint64) []string {
	var out []string
	if model != "" && !strings.EqualFold(g.Name, model) && !market.ModelMatches(g.Name, model) {
		out = append(out, fmt.Sprintf("%s is a %q, offered as %q", g.UUID, g.Name, model))
	}
	// A driver reports the same total whichever API asks; a hundredth
	// leaves room for one that reserves a little.
	if mem > 0 && g.MemoryBytes < mem-mem/100 {
		out = append(out, fmt.Sprintf("%s has %s of memory, offered with %s", g.UUID, market.Size(g.MemoryBytes), market.Size(mem)))
	}
	if !g.KernelOK {
		out = append(out, fmt.Sprintf("%s did not run the probe's kernel right", g.UUID))
	}
	if b, ok := gpuprobe.BoundFor(model); ok && time.Duration(g.KernelNs) > b.Max {
		out = append(out, fmt.Sprintf("%s ran the kernel in %s, a %s takes at most %s", g.UUID, time.Duration(g.KernelNs), b.Family, b.Max))
	}
	return out
}

// probeFailed is why the probe of lease failed, or "".
func (r *Record) probeFailed(lease string) string {
	if r.ProbeLease == lease {
		return r.ProbeFailed
	}
	return ""
}

// check refuses a receipt or an output of a lease whose probe
// failed, but for the one final receipt that ends it there: failed, by
// the provider, for the probe.
func (j probePhase) check(lease string, r *ledger.Receipt) error {
	var why string
	j.view(func(rec *Record) { why = rec.probeFailed(lease) })
	switch {
	case why == "":
		return nil
	case r == nil:
		return fmt.Errorf("lease %s ended at the GPU probe (%s): no output is taken", lease, why)
	case !r.Final:
		return nil // held time before the ending, not owed once it comes
	case r.Outcome != ledger.OutcomeFailed || r.Attribution != ledger.AttributionProvider || !strings.HasPrefix(r.Reason, ledger.ReasonGPUProbe):
		return fmt.Errorf("lease %s ended at the GPU probe (%s): only a final receipt failed by the provider for it is countersigned", lease, why)
	}
	return nil
}

// requeue puts the job back in the queue once the final receipt
// of a lease whose probe failed is countersigned: the release is announced
// as requeued, so that peers hold the job open for its re-announcement,
// which avoids the provider.
func (j probePhase) requeue(ctx context.Context, r ledger.Receipt, gpus []string) {
	body := wire.ReleaseBody{Lease: r.Lease, Job: r.Job, Provider: r.Provider.String(), Submitter: r.Submitter.String(), GPUs: gpus,
		Outcome: r.Outcome, Attribution: r.Attribution, HeldMs: r.HeldUntil.Sub(r.HeldFrom).Milliseconds(), At: r.HeldUntil.UnixMilli(), Requeued: true}
	if err := j.publishJob(ctx, marketOf(j.jobTracker), wire.KindRelease, body); err != nil {
		j.log.Warn("announce release of a lease that failed its GPU probe", "lease", r.Lease, "err", err)
	}
	(failureWatch{j.jobTracker}).avoid(ctx, r.Provider.String(), r.Lease, r.Reason)
}

// ended reports whether the probe of lease failed here.
func (j probePhase) ended(lease string) bool {
	var why string
	j.view(func(rec *Record) { why = rec.probeFailed(lease) })
	return why != ""
}
