package provider

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/node/images"
)

// Content the job brought.
//
// A job's image, inputs and the checkpoint it resumes from come from its
// submitter, and its output from the job itself: a provider parses all of
// them, and any may be hostile. What this node refuses (a layer that
// writes outside its root, a DAG name with "/", a blob that does not match
// its digest, a tree over a cap) is the job's doing and would be refused
// the same way by every provider, so the lease ends failed, attributed to
// the job, and the submitter neither resumes nor requeues it and avoids no
// one for it. What went wrong around the content (a full disk, a stalled
// transfer) is not marked so, and keeps the attribution it had.
//
// A bug of ours that such content triggers is contained too: a panic in a
// lease's goroutine is recovered there, logged with its stack and counted
// (Metrics.Panics), and ends that lease failed, attributed to the provider,
// with its GPUs released and its record kept; the daemon and every other
// lease go on. A crash that cannot be recovered (the runtime's own fatal
// errors) leaves Record.Handling set, and the restart ends the lease the
// same way instead of letting it go on to crash the next provider.

// refusedContent reports whether err says that content the job brought
// was refused, as opposed to failing for a reason of this node's or the
// network's.
func refusedContent(err error) bool {
	if images.Refused(err) {
		return true
	}
	for _, target := range []error{
		content.ErrInvalidData, content.ErrUnsafeName, content.ErrUnsafeLink,
		content.ErrUnsupported, content.ErrTooLarge,
		// A source that answers it lacks a block of a DAG the job names:
		// the DAG is not on the network, whoever asks.
		content.ErrNotFound,
	} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// handle runs fn, which parses content the job brought, with the lease's
// record saying so on disk for as long as it runs (Record.Handling).
func (lr *leaseRunner) handle(what string, fn func() error) error {
	lr.change(func(r *Record) { r.Handling = what })
	err := fn()
	lr.change(func(r *Record) { r.Handling = "" })
	return err
}

// errInternal is the cause given to a lease's context when one of its
// goroutines panicked: the lease ends failed, the provider's fault.
var errInternal = errors.New("internal error in the provider")

// recovered ends the lease after a panic its goroutine recovered: logged
// with its stack, counted, and the lease's run stopped with errInternal so
// that it goes to release. where names the goroutine.
func (lr *leaseRunner) recovered(where string, v any) {
	lr.countPanic(where, v, debug.Stack())
	reason := fmt.Sprintf("internal error (%s): %v", where, v)
	lr.change(func(r *Record) {
		r.end(ledger.Ending{Outcome: ledger.OutcomeFailed, Attribution: ledger.AttributionProvider, Reason: reason})
		r.Handling = ""
	})
	if _, cancel := lr.stopper(); cancel != nil {
		cancel(errInternal)
	}
}

// countPanic logs a recovered panic with its stack and counts it.
func (e *env) countPanic(where string, v any, stack []byte) {
	e.log.Error("panic recovered", "where", where, "panic", fmt.Sprint(v), "stack", string(stack))
	if e.d.Metrics != nil && e.d.Metrics.Panics != nil {
		e.d.Metrics.Panics.Inc()
	}
}

// recoverPanic, deferred at the top of a goroutine that is no lease's,
// recovers a panic there, logs and counts it.
func (e *env) recoverPanic(where string) {
	if v := recover(); v != nil {
		e.countPanic(where, v, debug.Stack())
	}
}

// guarded runs fn, one of a lease's goroutines, and ends the lease if fn
// panics.
func (lr *leaseRunner) guarded(where string, fn func()) {
	defer func() {
		if v := recover(); v != nil {
			lr.recovered(where, v)
		}
	}()
	fn()
}

// ctxInternal reports whether ctx, a lease's, was stopped by a panic.
func ctxInternal(ctx context.Context) bool { return errors.Is(context.Cause(ctx), errInternal) }

// endInterrupted ends a lease that a restart found open. One whose node
// stopped while parsing content the job brought is not let go on
// elsewhere, where it could stop that node too: it ends failed, attributed
// to this provider (what stopped it is not proven to be the job's), and
// the submitter does not resume it. Any other ends provider-lost, and so
// does one whose run completed but whose output was not taken before the
// restart.
func endInterrupted(r *Record) {
	if r.State == Released {
		return
	}
	if r.Outcome != "" && (r.Outcome != ledger.OutcomeCompleted || r.Output != "") {
		return // ended, and what it left is here
	}
	if r.Handling != "" {
		r.setEnding(ledger.Ending{Outcome: ledger.OutcomeFailed, Attribution: ledger.AttributionProvider,
			Reason: "the provider stopped while " + r.Handling + "; not tried again, since that may be what stopped it"})
		r.Handling = ""
		return
	}
	if r.Outcome == ledger.OutcomeCompleted {
		// The run completed, but the restart came before its output was
		// taken, and the lease's folder does not outlive a restart: a
		// "completed" with nothing to show would be a lie.
		r.setEnding(ledger.Ending{Outcome: ledger.OutcomeProviderLost, Attribution: ledger.AttributionProvider,
			Reason: "provider restarted before it took the job's output"})
		return
	}
	r.end(ledger.Ending{Outcome: ledger.OutcomeProviderLost, Attribution: ledger.AttributionProvider, Reason: "provider restarted"})
}

// outputLimits are the caps on what a job leaves in its output or
// checkpoint folder: no more bytes than the disk it declared (a sparse
// file counts as its size, so a 1 TiB hole does not pass), and this node's
// caps on entries and depth.
func outputLimits(lim content.Limits, diskBytes uint64) content.Limits {
	lim.MaxBytes = int64(min(diskBytes, 1<<62))
	return lim
}

// namedCap adds to an error of a cap the setting that set it, so that the
// job's reason says what to change.
func namedCap(err error) error {
	var le *content.LimitError
	if !errors.As(err, &le) {
		return err
	}
	// The cap alone: the error around it names folders of this node's,
	// which are nothing to the job (and a job's own path can be long).
	switch le.Limit {
	case "entries":
		return fmt.Errorf("%w (the provider's --max-entries)", le)
	case "depth":
		return fmt.Errorf("%w (the provider's --max-depth)", le)
	}
	return fmt.Errorf("%w (request.disk)", le)
}
