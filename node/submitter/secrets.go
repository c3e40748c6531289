package submitter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/state"
	"github.com/e31network/e31/node/task"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
)

// A job's secrets (market.Secret) are values no peer but the provider of
// its lease may see. The declaration signed and broadcast names them; this
// node keeps their values in the record store under state.PrefixSecret,
// apart from the job's Record (which the API, the dashboard and e31 status
// read, and which a log line may name), keyed by the job as its user
// submitted it (secretsRoot): every attempt of the job, every task of an
// array and every part of a gang reads the same values, so a resumption or
// a retry finds them there. They leave this node only in the reply to a
// proposal it has countersigned (proposal.go), and are deleted once the
// job has ended for good (secretsLoop). A job resumed by hand after that
// is given them again (e31 resume --secret).

// secretStore keeps the values of the jobs' secrets in the record store.
type secretStore struct {
	records Records // immutable
	// mu guards gen and recovered. An ordering lock: it is held across
	// the store's write or deletion of a job's values, so that a deletion
	// decided before a newer write never removes that write.
	mu sync.Mutex
	// gen counts the writes of each job's values in this run; a job whose
	// values are in the store has an entry.
	gen map[string]uint64
	// recovered marks the jobs whose values a previous run left.
	recovered map[string]bool
}

// storedSecrets is what the store holds for a job.
type storedSecrets struct {
	Job    string            `json:"job"`
	Values map[string][]byte `json:"values"`
}

// recover lists the jobs whose values a previous run left.
func (st *secretStore) recover() error {
	var jobs []string
	err := st.records.Each(state.PrefixSecret, func(b []byte) error {
		var k struct { // the job alone: the values stay where they are
			Job string `json:"job"`
		}
		if err := json.Unmarshal(b, &k); err != nil || k.Job == "" {
			return nil // not one of ours; nothing names it
		}
		jobs = append(jobs, k.Job)
		return nil
	})
	if err != nil {
		return fmt.Errorf("list the jobs' secrets: %w", err)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.gen == nil {
		st.gen, st.recovered = map[string]uint64{}, map[string]bool{}
	}
	for _, j := range jobs {
		st.gen[j]++
		st.recovered[j] = true
	}
	return nil
}

// keep writes job's values, in place of any before.
func (st *secretStore) keep(job string, values map[string][]byte) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if err := st.records.Put(state.PrefixSecret, job, storedSecrets{Job: job, Values: values}); err != nil {
		return fmt.Errorf("keep the secrets of job %s: %w", job, err)
	}
	if st.gen == nil {
		st.gen, st.recovered = map[string]uint64{}, map[string]bool{}
	}
	st.gen[job]++
	delete(st.recovered, job)
	return nil
}

// has reports whether job's values are kept.
func (st *secretStore) has(job string) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	_, ok := st.gen[job]
	return ok
}

// load reads job's values; nil when none are kept.
func (st *secretStore) load(job string) (map[string][]byte, error) {
	var s storedSecrets
	ok, err := st.records.Get(state.PrefixSecret, job, &s)
	if err != nil {
		return nil, fmt.Errorf("read the secrets of job %s: %w", job, err)
	}
	if !ok {
		return nil, nil
	}
	return s.Values, nil
}

// keptSecrets is a job whose values are kept, as drop needs it: the write
// it saw, and whether a previous run left them.
type keptSecrets struct {
	gen       uint64
	recovered bool
}

// kept lists the jobs whose values are kept.
func (st *secretStore) kept() map[string]keptSecrets {
	st.mu.Lock()
	defer st.mu.Unlock()
	out := make(map[string]keptSecrets, len(st.gen))
	for j, g := range st.gen {
		out[j] = keptSecrets{gen: g, recovered: st.recovered[j]}
	}
	return out
}

// drop deletes job's values, unless they were written again since the
// write gen counted, and reports whether it did.
func (st *secretStore) drop(job string, gen uint64) (bool, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if cur, ok := st.gen[job]; !ok || cur != gen {
		return false, nil
	}
	if err := st.records.Delete(state.PrefixSecret, job); err != nil {
		return false, fmt.Errorf("delete the secrets of job %s: %w", job, err)
	}
	delete(st.gen, job)
	delete(st.recovered, job)
	return true, nil
}

// forget deletes job's values, whichever write they came from.
func (st *secretStore) forget(job string) error {
	st.mu.Lock()
	gen, ok := st.gen[job]
	st.mu.Unlock()
	if !ok {
		return nil
	}
	_, err := st.drop(job, gen)
	return err
}

// secretsRoot is the job whose values an attempt reads: the job as its
// user submitted it, through the array or gang a task or part is of, and
// the hold a job held for its upstreams was first.
func (p *parts) secretsRoot(r *Record) string {
	id := r.root()
	if r.Array != "" {
		id = r.Array
	} else if a, _, ok := market.SplitTaskID(id); ok {
		id = a // a later attempt of a task
	}
	if id == r.ID {
		return id
	}
	if j := p.reload(id); j != nil {
		j.view(func(a *Record) { id = a.root() })
	}
	return id
}

// secretsGiven checks the values given with a declaration for its secrets,
// and returns the declaration with its secrets' from taken out: where the
// command read a value is its caller's business, never signed.
func secretsGiven(decl market.Declaration, values map[string][]byte) (market.Declaration, error) {
	if len(decl.Secrets) == 0 && len(values) == 0 {
		return decl, nil
	}
	if err := market.CheckSecretValues(decl.Secrets, values); err != nil {
		return decl, invalid(err)
	}
	named := make([]market.Secret, len(decl.Secrets))
	for i, s := range decl.Secrets {
		named[i] = market.Secret{Name: s.Name}
	}
	decl.Secrets = named
	return decl, nil
}

// keepSecrets keeps the values of a new job's secrets under its ID, before
// its record is written and its declaration broadcast: a proposal may come
// at once. For an attempt that continues parent's job, nothing is given:
// the job's values must still be kept. The caller of a new job's submit
// drops the values should the job not be registered (forgetUnregistered).
func (s *intake) keepSecrets(id string, decl market.Declaration, parent *Record, values map[string][]byte) error {
	if len(decl.Secrets) == 0 {
		return nil
	}
	if parent != nil {
		if root := s.secretsRoot(parent); !s.secrets.has(root) {
			return invalid(fmt.Errorf("job %s declares the secrets %s, whose values this node dropped when the job ended: give them again (e31 resume --secret NAME)",
				root, strings.Join(market.SecretNames(decl.Secrets), ", ")))
		}
		return nil
	}
	return s.secrets.keep(id, values)
}

// forgetUnregistered drops the values kept for a job whose submit failed
// before its record was registered.
func (s *intake) forgetUnregistered(id string) {
	if s.jobs.get(id) != nil {
		return
	}
	if err := s.secrets.forget(id); err != nil {
		s.log.Warn("drop the secrets of a job not submitted", "job", id, "err", err)
	}
}

// resumeSecrets keeps the values given with e31 resume --secret for the
// job that id is an attempt of, in place of any kept: checked against its
// declaration, whose secrets the resumption keeps.
func (s *intake) resumeSecrets(id string, values map[string][]byte) error {
	j, err := s.jobs.find(id)
	if err != nil {
		return err
	}
	var rec Record
	j.view(func(r *Record) { rec = r.copy() })
	if err := market.CheckSecretValues(rec.Declaration.Secrets, values); err != nil {
		return invalid(err)
	}
	return s.secrets.keep(s.secretsRoot(&rec), values)
}

// leaseSecrets are the values the provider of a lease on the job gets with
// the countersignature: nil for a job with no secrets. A job whose values
// this node no longer holds (they were dropped as it ended, or the store
// lost them) is not leased: its run would miss them.
func (j *jobTracker) leaseSecrets() (wire.SecretValues, error) {
	var rec Record
	j.view(func(r *Record) {
		if len(r.Declaration.Secrets) > 0 {
			rec = r.copy()
		}
	})
	if len(rec.Declaration.Secrets) == 0 {
		return nil, nil
	}
	root := j.secretsRoot(&rec)
	values, err := j.secrets.load(root)
	if err != nil {
		return nil, err
	}
	out := wire.SecretValues(values)
	if err := out.Match(rec.Declaration.Secrets); err != nil {
		j.log.Warn("proposal declined: the job's secrets are not all kept", "job", j.id, "root", root)
		return nil, p2p.Refuse(wire.CodeDeclined, errors.New("declined: the submitter no longer holds the job's secrets"))
	}
	return out, nil
}

// secretsLoop deletes the values of the jobs that have ended for good.
func (s *Submitter) secretsLoop(ctx context.Context) {
	task.Every(ctx, evictEvery, func(time.Time) {
		s.dropEndedSecrets()
	})
}

// dropEndedSecrets deletes the values of each job that has ended for good:
// its view is terminal, which a resumption or retry still due is not (the
// view says it is queued), nor an array with a task still running. A job
// whose values a previous run left and which this node does not hold was
// never registered (a submit stopped halfway): its values go too. Each job
// is judged under s.resuming, which every attempt that continues a job is
// submitted under, so that none starts between the judgement and the
// deletion.
func (s *kit) dropEndedSecrets() {
	for job, k := range s.secrets.kept() {
		s.resuming.Lock()
		over := false
		out, _, err := s.view(job, 0, true)
		switch {
		case err != nil:
			over = k.recovered && errors.Is(err, ErrNotFound)
		default:
			over = out.State.Terminal()
		}
		if over {
			if dropped, err := s.secrets.drop(job, k.gen); err != nil {
				s.log.Warn("drop the secrets of an ended job", "job", job, "err", err)
			} else if dropped {
				s.log.Info("secrets dropped", "job", job)
			}
		}
		s.resuming.Unlock()
	}
}
