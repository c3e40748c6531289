package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/testnet/cluster"
)

// Peers that froze the same view of an epoch decide the same assignments,
// and peers on a quiet LAN freeze the same view almost every epoch.
func TestSameViewSameAssignments(t *testing.T) {
	c := start(t, cluster.Options{
		N:         5,
		GPUs:      2,
		Heartbeat: time.Second,
		// The epoch's pass is what this test is about: jobs that fit are
		// not leased straight away between epochs.
		Args: []string{"--epoch", "500ms", "--no-fast-path"},
	})
	keepLogsOnFailure(t, c)
	ctx := context.Background()

	type submitted struct {
		id  string
		sub int // index of the submitting node
	}
	var jobs []submitted
	add := func(d market.Declaration) submitted {
		s := len(jobs) % len(c.Nodes)
		j := submit(t, c.Client(s), d)
		jobs = append(jobs, submitted{j.ID, s})
		return jobs[len(jobs)-1]
	}
	running := func(j api.Job) bool { return j.State == api.JobRunning }

	// Three jobs no offer can take keep every epoch's view non-empty, so
	// every node records a Match each epoch.
	for i := range 3 {
		d := decl(fmt.Sprintf("h200-%d", i), "true", 1, 20*time.Minute)
		d.Request.GPUModel = "H200"
		add(d)
	}
	// Two waves that fit (5 + 4 of the 10 GPUs), each waited for, so that
	// assignments are decided in more than one epoch; then a wave of 5 GPUs
	// for the one left free, so that jobs stay queued and are matched again
	// every epoch.
	waves := [][]int{{2, 1, 2}, {1, 2, 1}, {2, 2, 1}}
	for w, sizes := range waves {
		var wave []submitted
		for i, g := range sizes {
			name := fmt.Sprintf("wave%d-%d", w, i)
			wave = append(wave, add(decl(name, "sleep 600", g, 20*time.Minute)))
		}
		if w < len(waves)-1 {
			for _, s := range wave {
				waitJob(t, c.Client(s.sub), s.id, 60*time.Second, "running", running)
			}
		}
	}

	// Let every node match the queued jobs for twenty more epochs, some
	// ten seconds of heartbeats and gossip.
	after := latestEpoch(t, c.Client(0)) + 20
	ctxW, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for i := range c.Nodes {
		for latestEpoch(t, c.Client(i)) < after {
			select {
			case <-ctxW.Done():
				t.Fatalf("node%d matched no epoch after %d in 30s", i, after)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}

	// Epoch -> node -> that node's Match.
	byEpoch := map[uint64][]api.Match{}
	for i := range c.Nodes {
		ms, err := c.Client(i).Matches(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			if !m.Fast {
				byEpoch[m.Epoch] = append(byEpoch[m.Epoch], m)
			}
		}
	}
	epochs := make([]uint64, 0, len(byEpoch))
	for e, ms := range byEpoch {
		if len(ms) == len(c.Nodes) {
			epochs = append(epochs, e)
		}
	}
	slices.Sort(epochs)

	agreed, agreedWithJobs, agreedWithAssignments := 0, 0, 0
	for _, e := range epochs {
		// Every group of nodes that froze the same view must decide the
		// same, whether or not the other nodes froze it too.
		groups := map[string][]int{}
		for i, m := range byEpoch[e] {
			groups[m.ViewHash] = append(groups[m.ViewHash], i)
		}
		for hash, members := range groups {
			first := byEpoch[e][members[0]]
			want, err := json.Marshal(first.Assignments)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range members[1:] {
				m := byEpoch[e][k]
				got, err := json.Marshal(m.Assignments)
				if err != nil {
					t.Fatal(err)
				}
				if string(got) != string(want) || m.Jobs != first.Jobs {
					t.Errorf("epoch %d, view %s: two nodes decided differently on the same view:\n%d jobs: %s\n%d jobs: %s", e, hash, first.Jobs, want, m.Jobs, got)
				}
			}
		}
		if len(groups) == 1 {
			agreed++
			if byEpoch[e][0].Jobs > 0 {
				agreedWithJobs++
			}
			if len(byEpoch[e][0].Assignments) > 0 {
				agreedWithAssignments++
			}
		} else {
			var sizes []string
			for hash, members := range groups {
				sizes = append(sizes, fmt.Sprintf("%.12s×%d", hash, len(members)))
			}
			slices.Sort(sizes)
			t.Logf("epoch %d: views differ: %s", e, strings.Join(sizes, " "))
		}
	}
	frac := 0.0
	if len(epochs) > 0 {
		frac = float64(agreed) / float64(len(epochs))
	}
	t.Logf("%d epochs matched on all %d nodes; the view hashes agree in %d (%.0f%%); %d of those have jobs, %d assignments",
		len(epochs), len(c.Nodes), agreed, 100*frac, agreedWithJobs, agreedWithAssignments)
	if agreedWithJobs < 3 {
		t.Errorf("only %d epochs with jobs have one view on all nodes, want at least 3", agreedWithJobs)
	}
	if agreedWithAssignments < 1 {
		t.Errorf("no epoch with assignments has one view on all nodes")
	}
	// How often the views agree depends on gossip delay against the epoch
	// delay, so on the machine's load: a figure (logged above), not a
	// property. The property is that nodes that agree decide alike.

	for _, s := range jobs {
		if _, err := c.Client(s.sub).Withdraw(ctx, s.id); err != nil && !strings.Contains(err.Error(), "already") {
			t.Fatalf("withdraw %s: %v", s.id, err)
		}
	}
	for _, s := range jobs {
		waitJob(t, c.Client(s.sub), s.id, 60*time.Second, "an end", func(j api.Job) bool {
			return j.State == api.JobReleased || j.State == api.JobWithdrawn
		})
	}
	waitAllFree(t, c, 60*time.Second)
}

// latestEpoch is the newest epoch a node has run Match in, 0 if none.
func latestEpoch(t *testing.T, cl *api.Client) uint64 {
	t.Helper()
	ms, err := cl.Matches(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].Epoch
}

// stormJobs is the number of jobs TestStorm submits: E31_STORM_JOBS, else
// 100 with -short, else 500.
func stormJobs(t *testing.T) int { return jobCount(t, "E31_STORM_JOBS", 100, 500) }

// A storm of small jobs from five submitters on twenty providers: every job
// is leased once and completes, no GPU is in two leases at once, and every
// ledger verifies.
func TestStorm(t *testing.T) {
	n := stormJobs(t)
	c := start(t, cluster.Options{
		N:         20,
		GPUs:      4,
		Heartbeat: time.Second,
		Args:      []string{"--epoch", "250ms"},
	})
	keepLogsOnFailure(t, c)
	ctx := context.Background()
	const submitters = 5
	sizes := []int{1, 2, 1, 4, 1, 2, 1, 2, 4, 1} // 1: half, 2: 30%, 4: 20%

	// Job i goes to submitter i%5.
	type stormJob struct {
		id   string
		sub  int
		gpus int
	}
	jobs := make([]stormJob, n)
	errs := make([]error, submitters)
	began := time.Now()
	var wg sync.WaitGroup
	for s := range submitters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := c.Client(s)
			for i := s; i < n; i += submitters {
				script := "true"
				if i%3 != 0 {
					script = fmt.Sprintf("sleep 0.%d", i%5)
				}
				d := decl(fmt.Sprintf("storm-%d", i), script, sizes[i%len(sizes)], 5*time.Minute)
				d.Request.Memory = 64 * market.MiB
				raw, err := json.Marshal(d)
				if err != nil {
					errs[s] = err
					return
				}
				j, err := cl.Submit(ctx, api.SubmitRequest{Declaration: raw}, nil)
				if err != nil {
					errs[s] = fmt.Errorf("node%d: submit job %d: %w", s, i, err)
					return
				}
				jobs[i] = stormJob{id: j.ID, sub: s, gpus: d.Request.GPUs}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d jobs submitted in %s", n, time.Since(began).Round(time.Millisecond))

	// Wait until every job is released, from the submitters' own lists,
	// for as long as jobs keep ending: a machine that runs sandboxes
	// slowly takes longer, and a storm stalls only where something is
	// wrong. The whole wait stays within the package's test timeout.
	const stallAfter = 3 * time.Minute
	deadline := 25 * time.Minute
	if n > 500 {
		deadline = deadline * time.Duration(n) / 500
	}
	ctxW, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	byID := map[string]api.Job{}
	lastReport := time.Now()
	prog := newProgress()
	for {
		clear(byID)
		for s := range submitters {
			list, err := c.Client(s).Jobs(ctxW)
			if err != nil {
				break
			}
			for _, j := range list {
				byID[j.ID] = j
			}
		}
		done, states := 0, map[string]int{}
		for _, sj := range jobs {
			j, ok := byID[sj.id]
			if !ok {
				states["unknown"]++
				continue
			}
			states[string(j.State)]++
			if j.State.Terminal() {
				done++
			}
		}
		if done == n {
			break
		}
		prog.note(done)
		if time.Since(lastReport) > 30*time.Second {
			t.Logf("after %s: %v", time.Since(began).Round(time.Second), states)
			lastReport = time.Now()
		}
		stuckAll := func(why string) {
			var stuck []string
			for _, sj := range jobs {
				if j := byID[sj.id]; j.State != api.JobReleased && j.State != api.JobRejected && j.State != api.JobWithdrawn {
					stuck = append(stuck, sj.id)
				}
			}
			t.Fatalf("%s, %d of %d jobs not ended (%v); the first stuck:\n%s", why, n-done, n, states, describeJobs(c, byID, stuck, 5))
		}
		if prog.stalled(stallAfter) {
			stuckAll(fmt.Sprintf("no job ended for %s", stallAfter))
		}
		select {
		case <-ctxW.Done():
			stuckAll(fmt.Sprintf("after %s", deadline))
		case <-time.After(500 * time.Millisecond):
		}
	}
	wall := time.Since(began)
	t.Logf("%d jobs released in %s: %.2f jobs/s", n, wall.Round(time.Millisecond), float64(n)/wall.Seconds())

	// Every job was leased once and completed, on as many GPUs as it asked.
	failures := &cappedErrors{t: t, max: 20}
	defer failures.summary()
	for _, sj := range jobs {
		j := byID[sj.id]
		if j.State != api.JobReleased || j.Outcome != "completed" || j.Lease == "" || len(j.GPUs) != sj.gpus {
			failures.errorf("job %s: %s/%s lease %q on %d GPUs (want %d); reason %q\n%s", j.ID, j.State, j.Outcome, j.Lease, len(j.GPUs), sj.gpus, j.Reason, failures.evidence(c, byID, j.ID))
		}
	}

	// Every ledger verifies; every lease of a job, in any ledger, is the
	// one its submitter holds.
	all := make([][]ledger.Receipt, len(c.Nodes))
	for i := range c.Nodes {
		all[i] = receipts(t, c.Client(i), "")
	}
	leasesOf := map[string]map[string][]string{} // job -> lease -> node names
	for i, rs := range all {
		for _, r := range rs {
			if leasesOf[r.Job] == nil {
				leasesOf[r.Job] = map[string][]string{}
			}
			if ns := leasesOf[r.Job][r.Lease]; !slices.Contains(ns, c.Nodes[i].Name) {
				leasesOf[r.Job][r.Lease] = append(ns, c.Nodes[i].Name)
			}
		}
	}
	for _, sj := range jobs {
		if ls := leasesOf[sj.id]; len(ls) != 1 {
			failures.errorf("job %s has receipts of %d leases (want 1): %v\n%s", sj.id, len(ls), ls, failures.evidence(c, byID, sj.id))
		}
	}

	// The submitter holds one final receipt per job, of the job's lease.
	// (Nodes 0..4 also provide, so their ledgers hold the receipts of
	// other submitters' jobs too.) A side's own record of a lease, kept
	// while the other side was away, is superseded by the receipt both
	// signed: on a job that ran on its submitter's own GPUs the provider's
	// record lands in the same ledger when its own submitter's append of
	// an interim receipt was cut short by the end of the run.
	type subJob struct {
		sub int
		job string
	}
	finals, ownRecords := map[subJob][]ledger.Receipt{}, map[subJob][]ledger.Receipt{}
	for s := range submitters {
		for _, r := range all[s] {
			switch {
			case r.Final && r.Signer == "":
				finals[subJob{s, r.Job}] = append(finals[subJob{s, r.Job}], r)
			case r.Final:
				ownRecords[subJob{s, r.Job}] = append(ownRecords[subJob{s, r.Job}], r)
			}
		}
	}
	for sj, rs := range ownRecords {
		if len(finals[sj]) == 0 {
			finals[sj] = rs
		}
	}
	type held struct {
		job        string
		from, till time.Time
	}
	byGPU := map[string][]held{}
	for _, sj := range jobs {
		fs := finals[subJob{sj.sub, sj.id}]
		if len(fs) != 1 {
			var what []string
			for _, f := range fs {
				what = append(what, fmt.Sprintf("lease %s seq %d by %s digest %.16s", f.Lease, f.Seq, f.Provider, f.Digest()))
			}
			self := ""
			if byID[sj.id].Provider == c.Nodes[sj.sub].PeerID {
				self = " (the job ran on its submitter's own GPUs)"
			}
			failures.errorf("job %s: %d final receipts on its submitter node%d%s, want 1: %s", sj.id, len(fs), sj.sub, self, strings.Join(what, "; "))
			continue
		}
		f, j := fs[0], byID[sj.id]
		if f.Lease != j.Lease || f.Provider.String() != j.Provider || f.Outcome != "completed" || f.GPUs != sj.gpus {
			failures.errorf("job %s: final receipt of lease %s by %s, %s on %d GPUs; the job has lease %s by %s on %d", sj.id, f.Lease, f.Provider, f.Outcome, f.GPUs, j.Lease, j.Provider, len(j.GPUs))
		}
		for _, g := range j.GPUs {
			byGPU[g] = append(byGPU[g], held{sj.id, f.HeldFrom, f.HeldUntil})
		}
	}

	// No GPU is held by two leases at once. Held times are the provider's
	// clock, the same for every lease of a GPU.
	overlaps := 0
	for g, hs := range byGPU {
		slices.SortFunc(hs, func(a, b held) int { return a.from.Compare(b.from) })
		// prev is the hold, of those before k, that ends last.
		prev := hs[0]
		for k := 1; k < len(hs); k++ {
			if hs[k].from.Before(prev.till) {
				overlaps++
				if overlaps <= 5 {
					t.Errorf("GPU %s is in two leases at once: job %s held it %s–%s, job %s from %s\n%s", g,
						prev.job, prev.from.Format(time.StampMilli), prev.till.Format(time.StampMilli),
						hs[k].job, hs[k].from.Format(time.StampMilli), describeJobs(c, byID, []string{prev.job, hs[k].job}, 2))
				}
			}
			if hs[k].till.After(prev.till) {
				prev = hs[k]
			}
		}
	}
	if overlaps > 0 {
		t.Errorf("%d overlapping holds in all", overlaps)
	}
	if len(byGPU) == 0 && n > 0 {
		t.Error("no GPU was held by any job")
	}
	t.Logf("%d of %d GPUs were used", len(byGPU), 4*len(c.Nodes))

	waitAllFree(t, c, 60*time.Second)
}

// cappedErrors reports the first max failures in full, the first few of
// them with the daemons' log lines, and counts the rest, so that a failure
// of every job stays readable.
type cappedErrors struct {
	t      *testing.T
	n, max int
}

func (e *cappedErrors) errorf(format string, args ...any) {
	e.t.Helper()
	e.n++
	if e.n <= e.max {
		e.t.Errorf(format, args...)
	}
}

// evidence is describeJobs for the first three failures, "" after.
func (e *cappedErrors) evidence(c *cluster.Cluster, byID map[string]api.Job, ids ...string) string {
	if e.n >= 3 {
		return ""
	}
	return describeJobs(c, byID, ids, len(ids))
}

func (e *cappedErrors) summary() {
	if e.n > e.max {
		e.t.Errorf("%d job failures in all, the first %d shown", e.n, e.max)
	}
}

// describeJobs says, for up to max of the jobs ids, what the submitter
// reports and what every node's log says about the job and its lease.
func describeJobs(c *cluster.Cluster, byID map[string]api.Job, ids []string, max int) string {
	var b strings.Builder
	for k, id := range ids {
		if k == max {
			fmt.Fprintf(&b, "(%d more)\n", len(ids)-max)
			break
		}
		j := byID[id]
		fmt.Fprintf(&b, "job %s: state %s outcome %s provider %s lease %s gpus %v reason %q steps %v\n",
			id, j.State, j.Outcome, j.Provider, j.Lease, j.GPUs, j.Reason, stepNames(j))
		needles := []string{id}
		if j.Lease != "" {
			needles = append(needles, j.Lease)
		}
		b.WriteString(logLines(c, needles, 20))
	}
	return b.String()
}

// logLines returns up to max lines of each node's log that contain any of
// needles, each prefixed with the node's name.
func logLines(c *cluster.Cluster, needles []string, max int) string {
	var b strings.Builder
	for _, n := range c.Nodes {
		f, err := os.Open(filepath.Join(n.Data, "e31d.log"))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		found := 0
		for sc.Scan() && found < max {
			line := sc.Text()
			for _, nd := range needles {
				if strings.Contains(line, nd) {
					fmt.Fprintf(&b, "  %s: %s\n", n.Name, line)
					found++
					break
				}
			}
		}
		f.Close()
	}
	return b.String()
}

// keepLogsOnFailure copies every node's log out of the test's temporary
// dir when the test fails, and says where.
func keepLogsOnFailure(t *testing.T, c *cluster.Cluster) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		dir, err := os.MkdirTemp("", "e31-"+strings.ReplaceAll(t.Name(), "/", "-")+"-logs-")
		if err != nil {
			t.Logf("keep logs: %v", err)
			return
		}
		for _, n := range c.Nodes {
			if err := copyFile(filepath.Join(n.Data, "e31d.log"), filepath.Join(dir, n.Name+".log")); err != nil {
				t.Logf("keep log of %s: %v", n.Name, err)
			}
		}
		t.Logf("the nodes' logs are kept in %s (nodeN.log; peer IDs in nodes.json)", dir)
		if b, err := json.MarshalIndent(c.Nodes, "", "  "); err == nil {
			_ = os.WriteFile(filepath.Join(dir, cluster.NodesFile), b, 0o644)
		}
	})
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
