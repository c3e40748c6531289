package provider

import (
	"context"
	"errors"
	"strings"
	"time"
	"unicode"

	"github.com/e31network/e31/exec"
	"github.com/e31network/e31/exec/gpuprobe"
	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
)

// The GPU probe at the start of a lease: before the run, the leased GPUs
// prove what they are. Simulated GPUs answer with their simulated identity
// (model, memory, and their family's simulated kernel time); real ones run
// the probe of e31d doctor --gpu-job in the lease's sandbox
// (Deps.ProbeGPUs). The result goes to the submitter (wire.ProtoProbe),
// and the run waits for its answer, at most probeReplyWait:
//
//   - accepted: the run starts;
//   - refused with wire.CodeProbeFailed: the lease ends failed, this
//     provider's doing, with the submitter's reason (ledger.ReasonGPUProbe),
//     and the job never runs here;
//   - anything else (a submitter of a version without the protocol, one
//     that does not answer within the bound, a probe that could not run
//     here): the run starts, as it did before the probe. The final
//     receipt's GPUs seen are still checked by the submitter.

// probeReplyWait bounds the wait for the submitter's answer to the probe.
const probeReplyWait = 10 * time.Second

// probe runs the GPU probe and sends its result. It reports whether the
// run may start; when not, the lease has ended.
func (lr *leaseRunner) probe(ctx context.Context) bool {
	if len(lr.gpus) == 0 {
		return true // nothing leased to prove
	}
	t := lr.snapshot().Lease.Terms
	req, ok := lr.probeResult(ctx)
	if !ok {
		return true
	}
	req.Lease, req.Job = t.ID, t.Job
	cctx, cancel := context.WithTimeout(ctx, probeReplyWait)
	defer cancel()
	err := lr.d.Calls.Call(cctx, lr.submitter, wire.ProtoProbe, req, nil)
	switch {
	case err == nil:
		return true
	case p2p.RefusalCode(err) == wire.CodeProbeFailed:
		reason := probeReason(err)
		lr.log.Warn("GPU probe refused by the submitter: the job does not run here", "lease", t.ID, "reason", reason)
		lr.end(ledger.Ending{Outcome: ledger.OutcomeFailed, Attribution: ledger.AttributionProvider, Reason: reason})
		return false
	default:
		lr.log.Info("GPU probe not judged: the run starts", "lease", t.ID, "err", err)
		return true
	}
}

// probeReason is the ending reason of a lease whose probe was refused:
// the submitter's words, always under ledger.ReasonGPUProbe.
func probeReason(err error) string {
	var re *p2p.RemoteError
	msg := err.Error()
	if errors.As(err, &re) {
		msg = re.Msg
	}
	if !strings.HasPrefix(msg, ledger.ReasonGPUProbe) {
		msg = ledger.ReasonGPUProbe + ": " + msg
	}
	return msg
}

// probeResult is what the probe found on the leased GPUs, and false when
// no probe can run here (real GPUs, and no way to run it).
func (lr *leaseRunner) probeResult(ctx context.Context) (wire.ProbeRequest, bool) {
	if simulated(lr.gpus) {
		return simProbe(lr.gpus), true
	}
	if lr.d.ProbeGPUs == nil {
		return wire.ProbeRequest{}, false
	}
	rep, err := lr.d.ProbeGPUs(ctx, lr.gpus)
	if err != nil && len(rep.Devices) == 0 && rep.Error == "" {
		lr.log.Warn("GPU probe could not run", "lease", lr.snapshot().ID(), "err", err)
		return wire.ProbeRequest{}, false
	}
	return fromReport(rep, err), true
}

// simulated reports whether every GPU of gpus is simulated.
func simulated(gpus []exec.GPU) bool {
	for _, g := range gpus {
		if !g.Simulated {
			return false
		}
	}
	return true
}

// simProbe is the probe of simulated GPUs: their simulated identity.
func simProbe(gpus []exec.GPU) wire.ProbeRequest {
	var r wire.ProbeRequest
	for _, g := range gpus {
		r.GPUs = append(r.GPUs, wire.ProbedGPU{UUID: g.UUID, Name: g.Model, MemoryBytes: g.MemoryBytes,
			KernelNs: gpuprobe.SimKernelTime(g.Model).Nanoseconds(), KernelOK: true, Simulated: true})
	}
	return r
}

// fromReport is the probe's report as the submitter is sent it.
func fromReport(rep gpuprobe.Report, err error) wire.ProbeRequest {
	var r wire.ProbeRequest
	for _, d := range rep.Devices {
		r.GPUs = append(r.GPUs, wire.ProbedGPU{UUID: d.UUID, Name: d.Name, MemoryBytes: d.MemoryBytes,
			KernelNs: d.KernelTook.Nanoseconds(), KernelOK: d.KernelOK && d.Error == ""})
	}
	switch {
	case rep.Error != "":
		r.Error = rep.Error
	case err != nil:
		r.Error = err.Error()
	}
	r.Error = clip(r.Error, wire.MaxStringLen)
	return r
}

// clip makes s fit a probe result's text: control characters (a JIT
// log's newlines) as spaces, at most n bytes of valid UTF-8.
func clip(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	if len(s) > n {
		s = s[:n]
	}
	return strings.ToValidUTF8(s, "")
}
