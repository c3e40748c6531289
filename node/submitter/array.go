package submitter

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/e31network/e31/content"
	"github.com/ipfs/go-cid"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/state"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
)

// An array (market.Array) is signed and broadcast once; every peer's view
// holds a job for each of its tasks, under market.TaskID. This node keeps
// a record for the array, the handle its user follows, and one for each
// task, a job like any other from the proposal on: each task has its own
// lease, receipts, output and attempts. The array's record is never
// announced or leased; its view counts its tasks (arrayRun.view).

// arrayRun is the handle of an array's record: its tasks, each a chain of
// its own, counted (tally.go), withdrawn, run again and their outputs
// gathered together. Its state is its record and its tasks'; its tally
// has its own lock (tallies), and their leases and releases are announced
// in batches (taskbatch.go).
type arrayRun struct {
	k *kit
	p *jobTracker // the array's record
}

// readValuesFile reads an array's values_file into its values, one a
// line: they are signed with the declaration, so the file may be no
// larger than a signed declaration.
func readValuesFile(a *market.Array) error {
	if a == nil || a.ValuesFile == "" {
		return nil
	}
	if !filepath.IsAbs(a.ValuesFile) {
		return fmt.Errorf("array.values_file: %q is not an absolute path", a.ValuesFile)
	}
	f, err := os.Open(a.ValuesFile)
	if err != nil {
		return fmt.Errorf("array.values_file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, int64(wire.MaxDeclarationEnvelope)+1))
	if err != nil {
		return fmt.Errorf("array.values_file %s: %w", a.ValuesFile, err)
	}
	if len(b) > wire.MaxDeclarationEnvelope {
		return fmt.Errorf("array.values_file %s: over %d bytes; the values are signed with the declaration (put larger values in an input the job reads by $%s)", a.ValuesFile, wire.MaxDeclarationEnvelope, market.EnvTaskIndex)
	}
	b = bytes.TrimSuffix(b, []byte("\n"))
	if len(b) == 0 {
		return fmt.Errorf("array.values_file %s: has no values", a.ValuesFile)
	}
	var values []string
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		values = append(values, string(bytes.TrimSuffix(line, []byte("\r"))))
	}
	a.Values, a.ValuesFile = values, ""
	return nil
}

// arrayOwn is what an array's record keeps that its signed declaration
// does not: its labels, its sources as the user named them, and its
// array.max_failures.
type arrayOwn struct {
	labels      map[string]string
	sources     []string
	maxFailures int
	verify      *market.Verify
	// market is the class market the array is declared in; nil: this
	// node's own.
	market *p2p.Shard
	// before, when set, is given the array's record and its tasks' once
	// their IDs are known and before they are saved and broadcast (a
	// replica array names the array it checks; replicate.go).
	before func(*Record) error
}

// announceArray keeps the records of an array whose declaration is
// sealed, one for the array and one for each task, all in one write, and
// broadcasts the declaration once.
// held, when not nil, is the record of the array held for its upstreams
// (hold.go), whose handle the user keeps.
func (s *intake) announceArray(ctx context.Context, sealed p2p.Signed, decl market.Declaration, own arrayOwn, held *Record) (api.Job, error) {
	labels, sources := own.labels, own.sources
	if held != nil && !held.placeholder() && !held.isGang() {
		return api.Job{}, invalid(errors.New("an array is not resumed as a whole: resume its failed tasks (e31 resume ARRAY)"))
	}
	id := wire.JobID(sealed)
	now := time.Now()
	n := decl.Parts()
	parent := &Record{ID: id, Envelope: sealed.Raw, Declaration: decl, Market: own.market, Labels: labels, Sources: sources, State: api.JobQueued, Submitted: now, RecordArray: RecordArray{Tasks: n, MaxFailures: own.maxFailures}, RecordVerify: RecordVerify{Verify: own.verify}}
	if held != nil {
		parent.Root = held.root()
	}
	if held != nil && held.isGang() {
		// A gang goes on whole, as its next attempt: a retry after its
		// own failure, or a resumption.
		parent.ResumeOf, parent.Resumes, parent.Retries, parent.Preemptions = held.ID, held.Resumes+1, held.Retries, held.Preemptions
		switch {
		case held.RetryNext:
			parent.Resumes, parent.Retries = held.Resumes, held.Retries+1
		case held.PreemptNext:
			parent.Resumes, parent.Preemptions = held.Resumes, held.Preemptions+1
		}
	}
	parent.step(api.StepSubmit, now)
	// Pinned once, for the array: every task reads the same DAGs.
	if err := s.pinContent(ctx, parent); err != nil {
		return api.Job{}, err
	}
	tasks := make([]*Record, n)
	items := make([]state.Item, 0, n+1)
	items = append(items, state.Item{ID: id, Value: parent})
	for k := range n {
		i := decl.Array.Index(k)
		r := &Record{ID: market.TaskID(id, i), Envelope: sealed.Raw, Declaration: decl.Task(i), Market: own.market, Labels: labels, Sources: sources,
			State: api.JobQueued, Submitted: now, RecordArray: RecordArray{Array: id, Index: i}}
		r.step(api.StepSubmit, now)
		tasks[k] = r
		items = append(items, state.Item{ID: r.ID, Value: r})
	}
	if own.before != nil {
		if err := own.before(parent); err != nil {
			return api.Job{}, err
		}
		for _, r := range tasks {
			if err := own.before(r); err != nil {
				return api.Job{}, err
			}
		}
	}
	// Saved before it is broadcast: a proposal may arrive at once.
	if err := s.d.Records.PutAll(state.PrefixJob, items); err != nil {
		s.d.Metrics.PersistErrors.Inc()
		return api.Job{}, fmt.Errorf("persist array %s: %w", id, err)
	}
	s.jobs.add(newJobTracker(s.parts, parent))
	for _, r := range tasks {
		s.jobs.add(newJobTracker(s.parts, r))
	}
	if decl.Request.Gang() {
		s.gangs.of(id) // its run follows the gang from here
	}
	if own.verify.Checks() {
		if err := s.replicas(ctx, *parent, tasks); err != nil {
			s.log.Warn("replicas of the array not all submitted: the checks compare those that run", "array", id, "err", err)
		}
	}
	if err := s.publishJobRaw(ctx, own.market, sealed.Raw); err != nil {
		s.log.Warn("announce array", "array", id, "err", err)
	}
	if held == nil {
		s.d.Metrics.Submitted.Inc() // a held array was counted when it was
	}
	if held != nil && held.isGang() {
		// Linked once the new attempt is on disk, as resume links a job's.
		if j := s.jobs.get(held.ID); j != nil {
			j.change(func(r *Record) error { r.Next = id; return nil })
		}
	}
	s.log.Info("array submitted", "array", id, "name", decl.Name, "tasks", n, "gpus", decl.Request.GPUs, "gang", decl.Request.Gang())
	out, _ := (arrayRun{s.kit, s.jobs.get(id)}).view(0, true)
	// Under its own ID: a held array's release links its hold to it.
	out.ID = id
	return out, nil
}

// view is the view of an array's record: its tasks counted, each by
// its last attempt (tallies keeps the counts, reading only the tasks that
// changed), and the array released once every task has ended. Like next,
// it returns the view alone when its version is not seen or done is set,
// and else with a channel closed at a task's next change.
func (a arrayRun) view(seen uint64, done bool) (api.Job, <-chan struct{}) {
	s := a.k
	parent := a.p.snapshot()
	out := parent.API()
	tally := s.tallies.of(parent.ID, parent.Tasks, parent.taskIndices())
	for _, k := range tally.take() {
		t, _, err := s.view(market.TaskID(parent.ID, tally.index(k)), 0, true)
		if err != nil {
			continue // not on disk: a stop during submit; counted queued
		}
		tally.set(k, classOf(t), endedAt(t))
	}
	counts, version, wake := tally.read()
	counts.ID = parent.ID
	if parent.Root != "" {
		// Held for its upstreams first: the user's handle is the hold's.
		out.ID = parent.Root
	}
	out.Tasks = counts
	out.Version = s.versionBase + version
	out.Steps, out.GPUs = parent.Steps, []string{}
	switch {
	case counts.Queued+counts.Running == 0:
		out.State, out.Reason = api.JobReleased, ""
		out.Outcome = string(ledger.OutcomeCompleted)
		if counts.Failed > 0 {
			out.Outcome = string(ledger.OutcomeFailed)
			out.Reason = fmt.Sprintf("%d of %d tasks failed", counts.Failed, counts.Total)
			if parent.Stopped > 0 {
				out.Reason = stoppedReason(parent, counts)
			}
		} else if counts.Withdrawn > 0 {
			out.Outcome = string(ledger.OutcomeWithdrawn)
		}
	case counts.Running > 0:
		out.State, out.Reason = api.JobRunning, ""
	default:
		out.State = api.JobQueued
	}
	if parent.isGang() {
		s.gangs.view(&out, parent)
	}
	if parent.Verify.Checks() {
		v, pending := (spotDraw{s.verify}).shown(parent)
		out.Verification = v
		out.Version += s.verify.version() << 48
		if pending > 0 && out.State.Terminal() {
			out.State, out.Outcome, out.Reason = api.JobRunning, "", "checking: "+v.Reason
			wake = s.verify.next()
		}
	}
	if out.State.Terminal() || done || out.Version != seen {
		return out, nil
	}
	return out, wake
}

// resume runs again each task of the array that failed (its last
// attempt ended neither completed nor withdrawn): from its last
// checkpoint, or from the beginning with fromStart or where it declares
// none. An array with no failed task is a conflict.
func (a arrayRun) resume(ctx context.Context, fromStart bool) (api.Job, error) {
	tids := a.taskIDs()
	id := a.p.id
	resumed := 0
	for _, tid := range tids {
		_, i, _ := market.SplitTaskID(tid)
		t, ok := a.lastOfTask(tid)
		if !ok || !t.terminal() || t.resumeDue() || t.State == api.JobWithdrawn || t.Outcome == ledger.OutcomeCompleted {
			continue
		}
		first := fromStart
		if tj := a.k.jobs.get(tid); tj != nil {
			tj.view(func(r *Record) { first = first || r.Declaration.Output.Checkpoints == nil })
		}
		if _, err := a.k.resumeChain(ctx, tid, first, false); err != nil {
			return api.Job{}, fmt.Errorf("task %d: %w", i, err)
		}
		resumed++
	}
	if resumed == 0 {
		return api.Job{}, conflict(fmt.Errorf("array %s has no failed task to run again", id))
	}
	a.k.log.Info("array's failed tasks run again", "array", id, "tasks", resumed)
	out, _ := a.view(0, true)
	return out, nil
}

// taskIDs are the IDs of the array's tasks, lowest index first.
func (a arrayRun) taskIDs() []string {
	var ids []string
	a.p.view(func(r *Record) {
		ids = make([]string, r.Tasks)
		for k := range ids {
			ids[k] = market.TaskID(r.ID, r.taskIndex(k))
		}
	})
	return ids
}

// taskIndex is the index of the k-th task of an array's record, lowest
// first, and taskIndices its tasks' indices when it lists them (else
// nil). A gang's parts are indexed by place.
func (r *Record) taskIndex(k int) int { return r.Declaration.Array.Index(k) }

func (r *Record) taskIndices() []int {
	if r.Declaration.Array == nil {
		return nil
	}
	return r.Declaration.Array.Indices
}

// lastOfTask is the record of a task's last attempt; ok is false for a
// task this node does not hold (a stop during submit).
func (a arrayRun) lastOfTask(task string) (Record, bool) {
	t := a.k.jobs.get(task)
	if t == nil {
		return Record{}, false
	}
	return a.k.lastAttempt(t).snapshot(), true
}

// output is the array's output as a job:ARRAY/out source reads it: a
// DAG whose out folder holds one <index> folder a completed task, that
// task's own out folder, linked, not copied, and pinned for the array
// (the same tasks make the same CID, so a second downstream pins it
// again). An array of which no task completed has none.
func (a arrayRun) output(ctx context.Context) (string, error) { return a.outputAs(ctx, a) }

// outputAs is output, for the array shown by shown (a gang's, or an
// array held for its upstreams, is shown under another ID).
func (a arrayRun) outputAs(ctx context.Context, shown handle) (string, error) {
	id := a.p.id
	var entries []content.FolderEntry
	im := importer{a.k.parts}
	for _, tid := range a.taskIDs() {
		_, i, _ := market.SplitTaskID(tid)
		t, ok := a.lastOfTask(tid)
		if !ok || t.State != api.JobReleased || t.Outcome != ledger.OutcomeCompleted || t.Output == "" {
			continue
		}
		root, err := cid.Decode(t.Output)
		if err != nil {
			return "", fmt.Errorf("task %d's output %q: %w", i, t.Output, err)
		}
		out, err := im.resolveInDAG(ctx, root, "out")
		if err != nil {
			return "", fmt.Errorf("task %d's output: %w", i, err)
		}
		entries = append(entries, content.FolderEntry{Name: strconv.Itoa(i), Root: out})
	}
	if len(entries) == 0 {
		j, _ := shown.view(0, true)
		return "", fmt.Errorf("array %s has no completed task, so no output (it is %s%s)", j.ID, j.State, outcomeSuffix(j.Outcome))
	}
	reason := pinArrayOutput(id)
	folder, err := a.k.d.Store.Folder(ctx, entries, reason)
	if err != nil {
		return "", err
	}
	c, err := a.k.d.Store.Folder(ctx, []content.FolderEntry{{Name: "out", Root: folder}}, reason)
	if err != nil {
		return "", err
	}
	return c.String(), nil
}

func pinArrayOutput(array string) string { return "outputs of array " + array }

// withdraw withdraws every task of the array that has not ended, and
// announces one withdrawal for them all.
func (a arrayRun) withdraw(ctx context.Context) (api.Job, error) {
	id := a.p.id
	for _, tid := range a.taskIDs() {
		t := a.k.jobs.get(tid)
		if t == nil {
			continue
		}
		if err := a.k.withdrawLast(ctx, t, false); err != nil && !errors.Is(err, ErrConflict) {
			return api.Job{}, err
		}
	}
	if err := a.k.publishJob(ctx, marketOf(a.p), wire.KindWithdrawal, wire.WithdrawalBody{Job: id}); err != nil {
		a.k.log.Warn("announce withdrawal", "array", id, "err", err)
	}
	var replicas []string
	a.p.view(func(r *Record) { replicas = r.Replicas })
	for _, rid := range replicas {
		// The arrays that check this one's tasks (verify.replicas).
		if t := a.k.jobs.get(rid); t != nil {
			if _, err := (arrayRun{a.k, t}).withdraw(ctx); err != nil {
				a.k.log.Warn("withdraw the replica of an array", "array", id, "replica", rid, "err", err)
			}
		}
	}
	out, _ := a.view(0, true)
	return out, nil
}
