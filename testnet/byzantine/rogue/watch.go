package rogue

import (
	"context"
	"fmt"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Job is a declaration the rogue saw on the jobs topic, or one part of a
// gang it declares.
type Job struct {
	ID        string
	Submitter peer.ID
	Body      wire.DeclarationBody
	// Envelope is the signed declaration as it was gossiped.
	Envelope []byte
	// Arrived is when the rogue first saw it.
	Arrived time.Time
}

// Request is what the job asks of one provider: a gang's part asks for
// the gang's request.
func (j Job) Request() market.Request { return j.Body.Declaration.Request }

// maxSeen bounds the declarations, releases and avoid lists the rogue
// keeps: a test network declares a few dozen jobs.
const maxSeen = 10_000

// jobsSeen is what the jobs topic said, as the rogue keeps it. It belongs
// to the Rogue and is guarded by its mu.
type jobsSeen struct {
	jobs     map[string]Job
	releases map[string]wire.ReleaseBody // by lease
	// leases is, by job, the latest lease announced of it.
	leases map[string]wire.LeaseTerms
	// avoided is, by job, the providers its latest requeue avoids.
	avoided map[string][]string
	// changed is closed, and replaced, whenever one of the maps grows:
	// the waits below wake on it.
	changed chan struct{}
}

func newJobsSeen() jobsSeen {
	return jobsSeen{jobs: map[string]Job{}, releases: map[string]wire.ReleaseBody{}, leases: map[string]wire.LeaseTerms{}, avoided: map[string][]string{}, changed: make(chan struct{})}
}

// watch reads a topic until ctx ends, keeping what it says of jobs.
func (r *Rogue) watch(ctx context.Context, sub *p2p.Subscription) {
	for {
		s, err := sub.Next(ctx)
		if err != nil {
			return
		}
		r.note(s, time.Now())
	}
}

// note keeps what one message says.
func (r *Rogue) note(s p2p.Signed, now time.Time) {
	var decls []p2p.Signed
	var releases []wire.ReleaseBody
	var leases []wire.LeaseTerms
	var avoid []wire.AvoidEntry
	switch s.Message.Kind {
	case wire.KindDeclaration:
		decls = append(decls, s)
	case wire.KindRequeue:
		inner, err := wire.CheckRequeue(s)
		if err != nil {
			return
		}
		decls = inner
		var b wire.RequeueBody
		if s.Decode(&b) == nil {
			avoid = b.Avoid
		}
	case wire.KindRelease:
		var b wire.ReleaseBody
		if s.Decode(&b) != nil {
			return
		}
		releases = append(releases, b)
	case wire.KindLease:
		var l wire.SignedLease
		if s.Decode(&l) != nil {
			return
		}
		leases = append(leases, l.Terms)
	case wire.KindTaskBatch:
		b, err := wire.CheckTaskBatch(s)
		if err != nil {
			return
		}
		releases = b.Releases
		for _, l := range b.Leases {
			leases = append(leases, l.Terms)
		}
	default:
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	grew := false
	for _, d := range decls {
		var b wire.DeclarationBody
		if d.Decode(&b) != nil {
			continue
		}
		id := wire.JobID(d)
		if _, ok := r.seen.jobs[id]; ok || len(r.seen.jobs) >= maxSeen {
			continue
		}
		r.seen.jobs[id] = Job{ID: id, Submitter: d.Signer, Body: b, Envelope: d.Raw, Arrived: now}
		grew = true
	}
	for _, b := range releases {
		if _, ok := r.seen.releases[b.Lease]; !ok && len(r.seen.releases) < maxSeen {
			r.seen.releases[b.Lease] = b
			grew = true
		}
	}
	for _, t := range leases {
		if _, ok := r.seen.leases[t.Job]; ok || len(r.seen.leases) < maxSeen {
			r.seen.leases[t.Job] = t
			grew = true
		}
	}
	for _, a := range avoid {
		if len(r.seen.avoided) < maxSeen {
			r.seen.avoided[a.Job] = append([]string(nil), a.Providers...)
			grew = true
		}
	}
	if grew {
		close(r.seen.changed)
		r.seen.changed = make(chan struct{})
	}
}

// WaitJob waits for the declaration of job id, or of the gang a part
// named GANG.RANK belongs to, and returns the job.
func (r *Rogue) WaitJob(ctx context.Context, id string) (Job, error) {
	var j Job
	err := r.waitSeen(ctx, func(s *jobsSeen) bool {
		var ok bool
		j, ok = s.job(id)
		return ok
	})
	if err != nil {
		return Job{}, fmt.Errorf("rogue: no declaration of job %s: %w", id, err)
	}
	return j, nil
}

// job finds job id, or the part of a gang it names.
func (s *jobsSeen) job(id string) (Job, bool) {
	if j, ok := s.jobs[id]; ok {
		return j, true
	}
	gang, rank, ok := market.SplitTaskID(id)
	if !ok {
		return Job{}, false
	}
	g, ok := s.jobs[gang]
	if !ok || rank >= g.Body.Declaration.Request.Nodes {
		return Job{}, false
	}
	g.ID = id
	return g, true
}

// Released returns the release of lease seen on the jobs topic, if any:
// announced by its provider, or by its submitter (a task's, in a batch).
func (r *Rogue) Released(lease string) (wire.ReleaseBody, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	b, ok := r.seen.releases[lease]
	return b, ok
}

// LeasedTo returns the provider of job's latest lease announced, and
// whether a release of that lease was seen since.
func (r *Rogue) LeasedTo(job string) (provider string, released, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.seen.leases[job]
	if !ok {
		return "", false, false
	}
	_, released = r.seen.releases[t.ID]
	return t.Provider, released, true
}

// Avoided reports whether the latest requeue of job names provider in its
// avoid list.
func (r *Rogue) Avoided(job string, provider peer.ID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.seen.avoided[job] {
		if p == provider.String() {
			return true
		}
	}
	return false
}

// waitSeen waits until cond, asked under mu, holds of what the jobs topic
// said, or ctx ends.
func (r *Rogue) waitSeen(ctx context.Context, cond func(*jobsSeen) bool) error {
	return r.waitUnder(ctx, func() (bool, chan struct{}) {
		ok := cond(&r.seen)
		return ok, r.seen.changed
	})
}

// waitUnder asks check, under mu, until it holds or ctx ends; check
// returns too the channel closed at the next change of what it reads.
func (r *Rogue) waitUnder(ctx context.Context, check func() (bool, chan struct{})) error {
	for {
		r.mu.Lock()
		ok, changed := check()
		r.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}
