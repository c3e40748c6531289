package submitter

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
)

// A job, or chosen tasks of an array, run again with changed work (e31
// resume --with FILE | --image REF | --input SRC:MOUNT, and --indices):
// each goes on as the next attempt of the same job or task, as a resume
// does. What is kept: the job's ID, and a task's index and ID under the
// same array; the earlier attempts stay on record, so that status lists
// them and the job's held time sums them all. What changes is the work of
// the new attempts alone: each is a declaration this node signs and
// announces as a resumption of the attempt before, as any resumption is.
// The array's own record keeps the declaration it was submitted with.

// rework is what a rerun asks for: which tasks, and the work they run.
type rework struct {
	tasks     []int               // the indices chosen; none: the failed tasks
	decl      *market.Declaration // the work in full (--with); nil: the job's own
	image     string              // replaces work.image
	data      []market.Input      // replace the inputs at the same mounts, add the rest
	fromStart bool
}

// reworkAsked reports whether a resume request asks for more than a plain
// resume: chosen tasks, or changed work.
func reworkAsked(req api.SubmitRequest) bool {
	return givesDeclaration(req) || len(req.Tasks) > 0 || req.Image != "" || len(req.Data) > 0
}

// givesDeclaration reports whether a request carries a declaration: a
// client sends a resume's absent one as JSON null, as every e31 before
// resume --with did.
func givesDeclaration(req api.SubmitRequest) bool {
	d := bytes.TrimSpace(req.Declaration)
	return len(d) > 0 && !bytes.Equal(d, []byte("null"))
}

// changes reports whether the rerun changes the work.
func (w rework) changes() bool { return w.decl != nil || w.image != "" || len(w.data) > 0 }

// rerun runs the job req.ResumeOf names again as reworkAsked asks: an
// array's chosen tasks, a task named alone, or a job.
func (k *kit) rerun(ctx context.Context, req api.SubmitRequest, progress content.Progress) (api.Job, error) {
	w := rework{tasks: req.Tasks, image: req.Image, data: req.Data, fromStart: req.FromStart}
	if givesDeclaration(req) {
		if w.image != "" || len(w.data) > 0 {
			return api.Job{}, invalid(errors.New("the new work is a declaration, or the job's own with another image or inputs: not both"))
		}
		d, err := market.DecodeDeclaration(req.Declaration)
		if err != nil {
			return api.Job{}, invalid(fmt.Errorf("the new declaration: %w", err))
		}
		w.decl = &d
	}
	j := k.jobs.get(req.ResumeOf)
	if j == nil {
		return api.Job{}, fmt.Errorf("job %s: %w", req.ResumeOf, ErrNotFound)
	}
	var root, array string
	var index int
	j.view(func(r *Record) { root, array, index = r.root(), r.Array, r.Index })
	first := j
	if f := k.jobs.get(root); f != nil && f != j {
		first = f
		first.view(func(r *Record) { array, index = r.Array, r.Index })
	}
	if array != "" {
		// A task named alone: its array's rerun of that index.
		if len(w.tasks) > 0 {
			return api.Job{}, invalid(fmt.Errorf("%s is a task: name its array %s with --indices, or the task alone", req.ResumeOf, array))
		}
		w.tasks = []int{index}
		if first = k.jobs.get(array); first == nil {
			return api.Job{}, fmt.Errorf("array %s of task %s: %w", array, req.ResumeOf, ErrNotFound)
		}
	}
	last := k.lastAttempt(first)
	var gang, isArray bool
	last.view(func(r *Record) { gang, isArray = r.isGang(), r.isArray() })
	switch {
	case gang:
		return api.Job{}, invalid(fmt.Errorf("job %s is a gang, which goes on whole: e31 resume %s runs it again as signed", req.ResumeOf, req.ResumeOf))
	case isArray:
		return arrayRun{k, last}.rerun(ctx, w, progress)
	case len(w.tasks) > 0:
		return api.Job{}, invalid(fmt.Errorf("--indices: job %s is not an array", req.ResumeOf))
	}
	return k.rerunJob(ctx, first, w, progress)
}

// rerunJob runs a job that is no array again, as its next attempt, with
// the work w gives.
func (k *kit) rerunJob(ctx context.Context, first *jobTracker, w rework, progress content.Progress) (api.Job, error) {
	var own market.Declaration
	k.lastAttempt(first).view(func(r *Record) { own = r.Declaration })
	work, err := k.in.newWork(ctx, own, w, 1, progress)
	if err != nil {
		return api.Job{}, err
	}
	return k.continueChain(ctx, first.id, false, func(of *jobTracker) (market.Declaration, error) {
		return nextWork(of, work, w.fromStart)
	})
}

// rerun runs the array's chosen tasks again, each as the next attempt of
// its task, with the work w gives, or as signed where w changes none: a
// plain resume of each. Every check is made before the first is
// submitted.
func (a arrayRun) rerun(ctx context.Context, w rework, progress content.Progress) (api.Job, error) {
	var rec Record
	a.p.view(func(r *Record) { rec = r.copy() })
	indices, err := a.chosen(rec.ID, rec.Tasks, rec.Declaration.Array, w.tasks)
	if err != nil {
		return api.Job{}, err
	}
	next := func(i int) func(*jobTracker) (market.Declaration, error) {
		return func(of *jobTracker) (market.Declaration, error) {
			var none bool
			of.view(func(r *Record) { none = r.Declaration.Output.Checkpoints == nil })
			return of.resumption(w.fromStart || none)
		}
	}
	if w.changes() {
		work, err := a.k.in.newWork(ctx, rec.Declaration, w, rec.Tasks, progress)
		if err != nil {
			return api.Job{}, err
		}
		next = func(i int) func(*jobTracker) (market.Declaration, error) {
			return func(of *jobTracker) (market.Declaration, error) { return nextWork(of, work.Task(i), w.fromStart) }
		}
	}
	for n, i := range indices {
		if _, err := a.k.continueChain(ctx, market.TaskID(rec.ID, i), false, next(i)); err != nil {
			if n > 0 {
				return api.Job{}, fmt.Errorf("task %d: %w (tasks %s run again before it)", i, err, joinInts(indices[:n]))
			}
			return api.Job{}, fmt.Errorf("task %d: %w", i, err)
		}
	}
	a.k.log.Info("array's tasks run again", "array", rec.ID, "tasks", len(indices), "changed", w.changes())
	out, _ := a.view(0, true)
	return out, nil
}

// chosen are the indices of the tasks a rerun runs again: those asked for,
// each of which must be in the array (of n tasks, arr's indices) and have
// ended, and not be about to go on by itself; or, with none asked for,
// every task that failed.
func (a arrayRun) chosen(id string, n int, arr *market.Array, asked []int) ([]int, error) {
	if len(asked) == 0 {
		var failed []int
		for place := range n {
			i := arr.Index(place)
			t, ok := a.lastOfTask(market.TaskID(id, i))
			if ok && classOf(t.API()) == taskFailed && !t.resumeDue() {
				failed = append(failed, i)
			}
		}
		if len(failed) == 0 {
			return nil, conflict(fmt.Errorf("array %s has no failed task to run again (--indices chooses tasks that ended otherwise)", id))
		}
		return failed, nil
	}
	seen := map[int]bool{}
	var out []int
	for _, i := range asked {
		if _, ok := arr.Place(i); (arr != nil && !ok) || (arr == nil && (i < 0 || i >= n)) {
			if arr != nil && len(arr.Indices) > 0 {
				return nil, invalid(fmt.Errorf("--indices: array %s has tasks %s, no task %d", id, market.FormatIndexList(arr.Indices), i))
			}
			return nil, invalid(fmt.Errorf("--indices: array %s has tasks 0 to %d, no task %d", id, n-1, i))
		}
		if seen[i] {
			continue
		}
		seen[i] = true
		t, ok := a.lastOfTask(market.TaskID(id, i))
		switch {
		case !ok:
			return nil, fmt.Errorf("task %d of array %s: %w", i, id, ErrNotFound)
		case t.resumeDue():
			return nil, conflict(fmt.Errorf("task %d of array %s goes on by itself (%s)", i, id, t.Reason))
		case !t.terminal():
			return nil, conflict(fmt.Errorf("task %d of array %s is still %s; withdraw it first (e31 withdraw %s)", i, id, t.State, market.TaskID(id, i)))
		}
		out = append(out, i)
	}
	slices.Sort(out)
	return out, nil
}

// fitWork checks that a declaration given in full can be the work of a
// job's next attempts, own being the job's: an array's if tasks > 1. It
// returns it with the array's count and values where it declares none,
// and its secrets by name alone.
func fitWork(d, own market.Declaration, tasks int) (market.Declaration, error) {
	switch {
	case d.Request.Gang():
		return d, fmt.Errorf("the new declaration is a gang (request.nodes %d); a gang is not the work of a job's next attempts", d.Request.Nodes)
	case len(d.After) > 0 || len(d.AfterAny) > 0:
		return d, errors.New("the new declaration waits for other jobs (after, after_any); a rerun runs at once: drop them")
	}
	if d.Array != nil {
		a := *d.Array
		if err := readValuesFile(&a); err != nil {
			return d, err
		}
		d.Array = &a
	}
	switch got := d.Array.Tasks(); {
	case tasks <= 1 && got > 0:
		return d, fmt.Errorf("the new declaration is an array of %d tasks; the job it runs again is no array", got)
	case tasks > 1 && got == 0:
		// The array's count and values: each task keeps its own.
		d.Array = own.Array
	case tasks > 1 && got != tasks:
		return d, fmt.Errorf("the new declaration is an array of %d tasks, the array run again has %d: a task keeps its index, E31_TASK_COUNT and value, so declare the same count (or no array, to keep the array's)", got, tasks)
	}
	var unknown []string
	for i, sec := range d.Secrets {
		if !slices.ContainsFunc(own.Secrets, func(o market.Secret) bool { return o.Name == sec.Name }) {
			unknown = append(unknown, sec.Name)
		}
		d.Secrets[i] = market.Secret{Name: sec.Name}
	}
	if len(unknown) > 0 {
		return d, fmt.Errorf("the new declaration names the secrets %s, which the job does not: a rerun reads the job's own", strings.Join(unknown, ", "))
	}
	return d, nil
}

// nextWork builds the declaration of the successor of the attempt of
// that runs work: from of's last checkpoint when work declares
// checkpoints and fromStart is not set, as resumption does, and otherwise
// from the beginning.
func nextWork(of *jobTracker, work market.Declaration, fromStart bool) (market.Declaration, error) {
	var state api.JobState
	var terminal bool
	var from string
	of.view(func(r *Record) {
		state, terminal, from = r.State, r.terminal(), r.Checkpoint
		if cp := r.Declaration.Output.Checkpoints; from == "" && cp != nil {
			from = cp.From // lost before a checkpoint of its own
		}
	})
	if !terminal {
		return market.Declaration{}, conflict(fmt.Errorf("job %s is still %s; withdraw it first", of.id, state))
	}
	d := fromTheStart(work)
	if fromStart || from == "" || d.Output.Checkpoints == nil {
		return d, d.Validate()
	}
	d.Output.Checkpoints.From = from
	d.Work.Env = maps.Clone(d.Work.Env)
	if d.Work.Env == nil {
		d.Work.Env = map[string]string{}
	}
	d.Work.Env["E31_RESUME_FROM"] = d.Output.Checkpoints.Path
	return d, d.Validate()
}

// joinInts is the indices as a list: "2, 4".
func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}
