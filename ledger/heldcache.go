package ledger

import (
	"context"
	"sync"
)

// maxHeldJobs bounds the jobs heldCache remembers. Past it the cache starts
// again empty: a node that has followed more jobs than this pays one more
// read of each, not memory without end.
const maxHeldJobs = 200_000

// heldCache remembers, for each job HeldByJobs has summed, the leases it
// counted, so that following an array of 10,000 tasks does not decode every
// task's receipts on each look. The writer forgets a job whenever it
// commits an entry of that job, and a read that raced a commit is not kept,
// so what the cache gives is what the store would.
type heldCache struct {
	mu   sync.Mutex
	gen  uint64 // counts commits that forgot something
	jobs map[string][]countedLease
}

// countedLease is what HeldByJobs needs of one lease: its counted record,
// trimmed to the fields that held and owed time read.
type countedLease struct {
	r        Receipt
	oneSided bool
}

func (c *heldCache) get(job string) ([]countedLease, uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ls, ok := c.jobs[job]
	return ls, c.gen, ok
}

// put keeps ls for job if nothing was committed since gen.
func (c *heldCache) put(job string, ls []countedLease, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen {
		return
	}
	if c.jobs == nil || len(c.jobs) >= maxHeldJobs {
		c.jobs = make(map[string][]countedLease)
	}
	c.jobs[job] = ls
}

// forget drops what the cache holds of jobs, after a commit that wrote
// entries of them.
func (c *heldCache) forget(jobs []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	for _, j := range jobs {
		delete(c.jobs, j)
	}
}

// countedLeases returns the leases of job as HeldByJobs counts them, from
// the cache where it can.
func (l *Ledger) countedLeases(ctx context.Context, job string) ([]countedLease, error) {
	ls, gen, ok := l.held.get(job)
	if ok {
		return ls, nil
	}
	es, err := l.ByJob(ctx, job)
	if err != nil {
		return nil, err
	}
	settled := settledLeases(es)
	ls = make([]countedLease, 0, len(settled))
	for _, lr := range settled {
		r := lr.Counted()
		if r == nil {
			continue
		}
		ls = append(ls, countedLease{
			r: Receipt{
				Lease: r.Lease, Provider: r.Provider, Submitter: r.Submitter, GPUs: r.GPUs, CPUs: r.CPUs, MemoryBytes: r.MemoryBytes, DiskBytes: r.DiskBytes, Final: r.Final,
				HeldFrom: r.HeldFrom, HeldUntil: r.HeldUntil,
				Outcome: r.Outcome, Attribution: r.Attribution, CheckpointAt: r.CheckpointAt,
			},
			oneSided: lr.State == SettlementOneSided || lr.State == SettlementDisputed,
		})
	}
	l.held.put(job, ls, gen)
	return ls, nil
}
