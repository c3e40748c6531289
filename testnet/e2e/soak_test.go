package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/testnet/cluster"
	"github.com/e31network/e31/testnet/poll"
)

// ended reports whether a job has reached a state it never leaves.
func ended(j api.Job) bool {
	return j.State == api.JobReleased || j.State == api.JobRejected || j.State == api.JobWithdrawn
}

// peerIDs returns the peer IDs of the nodes at the given indexes.
func peerIDs(c *cluster.Cluster, idx []int) []string {
	var out []string
	for _, i := range idx {
		out = append(out, c.Nodes[i].PeerID)
	}
	return out
}

// waitProviderViews waits until every node of nodes sees exactly the
// providers want, each with gpus GPUs, and is connected to none of the
// peers in shut. It returns how long that took.
func waitProviderViews(t *testing.T, c *cluster.Cluster, nodes []int, want []string, gpus int, shut []string, d time.Duration) time.Duration {
	t.Helper()
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	wantSorted := slices.Sorted(slices.Values(want))
	for {
		last := ""
	check:
		for _, i := range nodes {
			cl := c.Client(i)
			ns, err := cl.Nodes(ctx)
			if err != nil {
				last = fmt.Sprintf("node%d: %v", i, err)
				break
			}
			var have []string
			for _, n := range ns {
				have = append(have, n.PeerID)
				if len(n.GPUs) != gpus {
					last = fmt.Sprintf("node%d sees %s with %d GPUs, want %d", i, n.PeerID, len(n.GPUs), gpus)
					break check
				}
			}
			slices.Sort(have)
			if !slices.Equal(have, wantSorted) {
				last = fmt.Sprintf("node%d sees providers %v, want %v", i, have, wantSorted)
				break
			}
			ps, err := cl.Peers(ctx)
			if err != nil {
				last = fmt.Sprintf("node%d: %v", i, err)
				break
			}
			for _, p := range ps {
				if slices.Contains(shut, p.PeerID) {
					last = fmt.Sprintf("node%d is still connected to %s", i, p.PeerID)
					break check
				}
			}
		}
		if last == "" {
			return time.Since(began)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("views did not settle in %s: %s\n%s", d, last, connectivity(c, nodes))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// connectivity says, for each of nodes, whom it is connected to and which
// providers it sees: the evidence when views do not settle.
func connectivity(c *cluster.Cluster, nodes []int) string {
	name := map[string]string{}
	for _, n := range c.Nodes {
		name[n.PeerID] = n.Name
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var b strings.Builder
	for _, i := range nodes {
		var peers, seen []string
		if ps, err := c.Client(i).Peers(ctx); err == nil {
			for _, p := range ps {
				peers = append(peers, name[p.PeerID])
			}
		}
		if ns, err := c.Client(i).Nodes(ctx); err == nil {
			for _, n := range ns {
				seen = append(seen, fmt.Sprintf("%s(last seen %s ago)", name[n.PeerID], time.Since(n.LastSeen).Round(time.Millisecond)))
			}
		}
		slices.Sort(peers)
		fmt.Fprintf(&b, "  node%d: connected to %v; sees %v\n", i, peers, seen)
	}
	return b.String()
}

// lastLogLines returns, for each node, the newest lines of its log (at most
// last) that contain needle, each prefixed with the node's name.
func lastLogLines(c *cluster.Cluster, needle string, last int) string {
	var b strings.Builder
	for _, n := range c.Nodes {
		raw, err := os.ReadFile(filepath.Join(n.Data, "e31d.log"))
		if err != nil {
			continue
		}
		var hits []string
		for line := range strings.Lines(string(raw)) {
			if strings.Contains(line, needle) {
				hits = append(hits, strings.TrimSpace(line))
			}
		}
		for _, h := range hits[max(0, len(hits)-last):] {
			fmt.Fprintf(&b, "  %s: %s\n", n.Name, h)
		}
	}
	return b.String()
}

// allLedgers returns every node's receipts, checking that each ledger
// verifies.
func allLedgers(t *testing.T, c *cluster.Cluster) [][]ledger.Receipt {
	t.Helper()
	all := make([][]ledger.Receipt, len(c.Nodes))
	for i := range c.Nodes {
		all[i] = receipts(t, c.Client(i), "")
	}
	return all
}

// leasesOfJobs maps each job with receipts in any ledger to its leases,
// each with the nodes holding receipts of it.
func leasesOfJobs(c *cluster.Cluster, all [][]ledger.Receipt) map[string]map[string][]string {
	out := map[string]map[string][]string{}
	for i, rs := range all {
		for _, r := range rs {
			if out[r.Job] == nil {
				out[r.Job] = map[string][]string{}
			}
			if ns := out[r.Job][r.Lease]; !slices.Contains(ns, c.Nodes[i].Name) {
				out[r.Job][r.Lease] = append(ns, c.Nodes[i].Name)
			}
		}
	}
	return out
}

// givenUpUnstarted reports whether r is a submitter's record of a lease
// other than the job's last that it gave up before the run started: one-
// sided, provider-lost, holding no time.
func givenUpUnstarted(r ledger.Receipt, last string) bool {
	return r.Lease != last && r.Final && r.Signer == ledger.SignerSubmitter &&
		r.Outcome == ledger.OutcomeProviderLost && r.HeldUntil.Equal(r.HeldFrom)
}

// gpuHold is a span during which a job held a GPU, on its provider's clock.
type gpuHold struct {
	job         string
	from, until time.Time
}

// checkNoOverlap fails the test for every GPU held by two jobs at once.
func checkNoOverlap(t *testing.T, c *cluster.Cluster, byID map[string]api.Job, byGPU map[string][]gpuHold) {
	t.Helper()
	overlaps := 0
	for g, hs := range byGPU {
		slices.SortFunc(hs, func(a, b gpuHold) int { return a.from.Compare(b.from) })
		for k := 1; k < len(hs); k++ {
			if prev := hs[k-1]; hs[k].from.Before(prev.until) {
				overlaps++
				if overlaps <= 5 {
					t.Errorf("GPU %s is in two leases at once: job %s held it %s–%s, job %s from %s\n%s", g,
						prev.job, prev.from.Format(time.StampMilli), prev.until.Format(time.StampMilli),
						hs[k].job, hs[k].from.Format(time.StampMilli), describeJobs(c, byID, []string{prev.job, hs[k].job}, 2))
				}
			}
		}
	}
	if overlaps > 0 {
		t.Errorf("%d overlapping holds in all", overlaps)
	}
}

// finalOn reports whether a node holds a final receipt of a job.
func finalOn(ctx context.Context, cl *api.Client, job string) (bool, error) {
	res, err := cl.Receipts(ctx, job, false)
	if err != nil {
		return false, err
	}
	var rs []ledger.Receipt
	if err := json.Unmarshal(res.Receipts, &rs); err != nil {
		return false, err
	}
	// Both signed: a side's own record of a lease it lost touch with does
	// not settle it.
	return slices.ContainsFunc(rs, func(r ledger.Receipt) bool { return r.Final && r.Signer == "" }), nil
}

// partitionEpoch is the --epoch of TestPartitionNoDoubleLease.
const partitionEpoch = 250 * time.Millisecond

func epochNow() uint64 { return uint64(time.Now().UnixMilli() / partitionEpoch.Milliseconds()) }

// A network split in two halves, each with a submitter and two providers,
// while jobs run across the cut and others wait in every view: both sides
// go on renting without leasing any job twice; once healed, the views
// converge again, the leases cut off settle, and jobs from both submitters
// run anywhere.
func TestPartitionNoDoubleLease(t *testing.T) {
	c := start(t, cluster.Options{
		N:             6,
		SimGPUsByNode: []string{"", "2xH100:80GiB", "2xH100:80GiB", "", "2xH100:80GiB", "2xH100:80GiB"},
		Heartbeat:     500 * time.Millisecond,
		// A provider cut off from a submitter frees the GPUs after 2s; the
		// output waits for the submitter to come back. A lease that does
		// not settle says why only at debug level.
		Args: []string{"--epoch", partitionEpoch.String(), "--provider-lost-after", "5s", "--output-timeout", "2s", "--log-level", "debug"},
	})
	keepLogsOnFailure(t, c)
	ctx := context.Background()
	sides := [2][]int{{0, 1, 2}, {3, 4, 5}}
	submitters := [2]int{0, 3}
	providersOf := [2][]string{peerIDs(c, []int{1, 2}), peerIDs(c, []int{4, 5})}
	began := time.Now()

	subOf := map[string]int{} // job -> submitting node
	var order []string
	submitWave := func(prefix string, count, gpus int, script string) []string {
		var ids []string
		for s, sub := range submitters {
			for k := range count {
				j := submit(t, c.Client(sub), decl(fmt.Sprintf("%s-%d-%d", prefix, s, k), script, gpus, time.Minute))
				subOf[j.ID] = sub
				ids = append(ids, j.ID)
			}
		}
		order = append(order, ids...)
		return ids
	}
	waitWave := func(ids []string, d time.Duration, what string, cond func(api.Job) bool) map[string]api.Job {
		out := map[string]api.Job{}
		for _, id := range ids {
			out[id] = waitJob(t, c.Client(subOf[id]), id, d, what, cond)
		}
		return out
	}

	// Before the split: fillers hold all eight GPUs, wherever Match put
	// them, and four more jobs wait in every node's view.
	fillers := submitWave("filler", 2, 2, "sleep 6")
	running := waitWave(fillers, time.Minute, "running", func(j api.Job) bool { return j.State == api.JobRunning })
	since := epochNow()
	queued := submitWave("queued", 2, 1, "sleep 1")
	{
		ctxQ, cancel := context.WithTimeout(ctx, 30*time.Second)
		for i := range c.Nodes {
			for {
				ms, err := c.Client(i).Matches(ctxQ)
				if err == nil && len(ms) > 0 && ms[len(ms)-1].Epoch > since && ms[len(ms)-1].Jobs >= len(queued) {
					break
				}
				select {
				case <-ctxQ.Done():
					t.Fatalf("node%d never matched the %d queued jobs: %v %v", i, len(queued), ms, err)
				case <-time.After(50 * time.Millisecond):
				}
			}
		}
		cancel()
	}
	cross := 0
	for _, id := range fillers {
		s := slices.Index(submitters[:], subOf[id])
		if slices.Contains(providersOf[1-s], running[id].Provider) {
			cross++
		}
	}
	t.Logf("before the split: 4 fillers hold the 8 GPUs (%d of them across the coming cut), %d jobs wait in every view", cross, len(queued))

	// Split: every node refuses the other side.
	for s, side := range sides {
		other := peerIDs(c, sides[1-s])
		for _, i := range side {
			if err := c.Client(i).Block(ctx, other); err != nil {
				t.Fatalf("node%d: block: %v", i, err)
			}
		}
	}
	split := time.Now()
	for s, side := range sides {
		took := waitProviderViews(t, c, side, providersOf[s], 2, peerIDs(c, sides[1-s]), 60*time.Second)
		t.Logf("split: side %v sees only its own providers after %s", side, took.Round(time.Millisecond))
	}

	// Both sides rent while split: the queued jobs and six more each, on
	// their own side. A filler across the cut ends on its submitter as
	// provider-lost.
	during := submitWave("split", 6, 1, "sleep 2")
	onOwnSide := append(slices.Clone(queued), during...)
	splitJobs := waitWave(append(slices.Clone(fillers), onOwnSide...), 2*time.Minute, "an end", ended)
	t.Logf("split: %d jobs ended on the two sides %s after the cut", len(splitJobs), time.Since(split).Round(time.Millisecond))
	for _, id := range onOwnSide {
		j := splitJobs[id]
		s := slices.Index(submitters[:], subOf[id])
		if j.Outcome != "completed" || !slices.Contains(providersOf[s], j.Provider) {
			t.Errorf("job %s from node%d ended %s on %s during the split, want completed on its own side %v (reason %q)\n%s",
				id, subOf[id], j.Outcome, j.Provider, providersOf[s], j.Reason, describeJobs(c, splitJobs, []string{id}, 1))
		}
	}
	for _, id := range fillers {
		j := splitJobs[id]
		t.Logf("split: filler %s from node%d on %s ended %s/%s (%s)", id, subOf[id], c.Nodes[nodeIndex(t, c, j.Provider)].Name, j.Outcome, j.Attribution, j.Reason)
	}

	// Heal: the nodes find each other again through their bootstrap peer and
	// the providers they remember.
	for i := range c.Nodes {
		if err := c.Client(i).Block(ctx, nil); err != nil {
			t.Fatalf("node%d: heal: %v", i, err)
		}
	}
	everyone := []int{0, 1, 2, 3, 4, 5}
	took := waitProviderViews(t, c, everyone, append(slices.Clone(providersOf[0]), providersOf[1]...), 2, nil, 90*time.Second)
	t.Logf("healed: every view holds all 4 providers again after %s", took.Round(time.Millisecond))

	// The leases cut off settle: each filler's submitter gets its final
	// receipt. A provider retries settling with a backoff of at most a
	// minute.
	healed := time.Now()
	unsettled := map[string]bool{}
	for _, id := range fillers {
		unsettled[id] = true
	}
	for len(unsettled) > 0 && time.Since(healed) < 75*time.Second {
		for id := range unsettled {
			ctxR, cancel := context.WithTimeout(ctx, 10*time.Second)
			if ok, _ := finalOn(ctxR, c.Client(subOf[id]), id); ok {
				delete(unsettled, id)
			}
			cancel()
		}
		if len(unsettled) > 0 {
			time.Sleep(200 * time.Millisecond) // polling interval
		}
	}
	for id := range unsettled {
		j := splitJobs[id]
		t.Errorf("job %s (lease %s, %s/%s on its submitter): no final receipt on its submitter %s after the heal; the provider's last words on the lease:\n%s",
			id, j.Lease, j.Outcome, j.Attribution, time.Since(healed).Round(time.Second), lastLogLines(c, "lease="+j.Lease, 3))
	}
	t.Logf("healed: %d of %d fillers' final receipts reached their submitter after %s", len(fillers)-len(unsettled), len(fillers), time.Since(healed).Round(time.Millisecond))

	// Jobs from both submitters complete on the healed network; ten of them
	// for eight GPUs, so that some wait and the healed views are matched
	// while busy.
	after := submitWave("healed", 5, 1, "sleep 1")
	healedJobs := waitWave(after, 2*time.Minute, "release", released)
	crossed := 0
	for _, id := range after {
		j := healedJobs[id]
		if j.Outcome != "completed" {
			t.Errorf("job %s from node%d ended %s after the heal (reason %q)\n%s", id, subOf[id], j.Outcome, j.Reason, describeJobs(c, healedJobs, []string{id}, 1))
		}
		s := slices.Index(submitters[:], subOf[id])
		if slices.Contains(providersOf[1-s], j.Provider) {
			crossed++
		}
	}
	t.Logf("healed: %d jobs completed, %d of them on the other side's providers", len(after), crossed)

	// Every job has one lease and one final receipt on each side, which says
	// what the submitter says; no GPU is in two leases at once.
	byID := map[string]api.Job{}
	for _, sub := range submitters {
		list, err := c.Client(sub).Attempts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range list {
			byID[j.ID] = j
		}
	}
	// A provider stores the final receipt both signed when the
	// countersignature comes back, which can be after the submitter has
	// released the job: wait for every provider's copy (bounded; what is
	// missing then is reported below).
	finalsIn := func(rs []ledger.Receipt, id string) int {
		n := 0
		for _, r := range rs {
			if r.Job == id && r.Final && r.Signer == "" {
				n++
			}
		}
		return n
	}
	all := allLedgers(t, c)
	poll.Eventually(30*time.Second, 200*time.Millisecond, func() bool {
		for _, id := range order {
			if j := byID[id]; !unsettled[id] && j.Provider != "" && finalsIn(all[nodeIndex(t, c, j.Provider)], id) == 0 {
				all = allLedgers(t, c)
				return false
			}
		}
		return true
	})
	leases := leasesOfJobs(c, all)
	byGPU := map[string][]gpuHold{}
	for _, id := range order {
		j := byID[id]
		if ls := leases[id]; len(ls) != 1 || len(ls[j.Lease]) == 0 {
			if !unsettled[id] || len(ls) > 0 { // a lease with no receipt yet is reported above
				t.Errorf("job %s (lease %s) has receipts of %d leases, want 1: %v\n%s", id, j.Lease, len(ls), ls, describeJobs(c, byID, []string{id}, 1))
			}
			continue
		}
		prov := nodeIndex(t, c, j.Provider)
		var finals [2][]ledger.Receipt
		for k, n := range []int{subOf[id], prov} {
			// A side's own record of the lease, kept while the other side
			// was cut off, is superseded by the receipt both signed.
			for _, r := range all[n] {
				if r.Job == id && r.Final && r.Signer == "" {
					finals[k] = append(finals[k], r)
				}
			}
		}
		if len(finals[0]) != 1 || len(finals[1]) != 1 {
			if !unsettled[id] { // else reported above
				t.Errorf("job %s: %d final receipts signed by both on its submitter, %d on its provider, want 1 and 1\n%s", id, len(finals[0]), len(finals[1]), describeJobs(c, byID, []string{id}, 1))
			}
			continue
		}
		f := finals[0][0]
		same := string(f.ProviderSig) == string(finals[1][0].ProviderSig)
		if !same || f.Verify() != nil || string(f.Outcome) != j.Outcome || f.GPUs != len(j.GPUs) {
			t.Errorf("job %s ended %s on %v; its final receipt: %s on %d GPUs, verify %v, the same on both sides %v\n%s",
				id, j.Outcome, j.GPUs, f.Outcome, f.GPUs, f.Verify(), same, describeJobs(c, byID, []string{id}, 1))
		}
		for _, g := range j.GPUs {
			byGPU[g] = append(byGPU[g], gpuHold{id, f.HeldFrom, f.HeldUntil})
		}
	}
	checkNoOverlap(t, c, byID, byGPU)
	waitAllFree(t, c, 30*time.Second)

	// No view keeps a job open once every job has ended: a node matches
	// only while its view holds open jobs, so its Match history goes quiet.
	const quietEpochs = 8
	quietFrom := time.Now()
	for {
		stale := ""
		for i := range c.Nodes {
			ctxM, cancel := context.WithTimeout(ctx, 10*time.Second)
			ms, err := c.Client(i).Matches(ctxM)
			cancel()
			if err != nil {
				t.Fatalf("node%d: matches: %v", i, err)
			}
			if len(ms) == 0 {
				continue
			}
			if m := ms[len(ms)-1]; epochNow() < m.Epoch+quietEpochs {
				stale = fmt.Sprintf("node%d still matches %d open jobs (epoch %d, assignments %+v)", i, m.Jobs, m.Epoch, m.Assignments)
				break
			}
		}
		if stale == "" {
			t.Logf("no view holds an open job %s after the last job ended", time.Since(quietFrom).Round(time.Millisecond))
			break
		}
		if time.Since(quietFrom) > 30*time.Second {
			t.Errorf("views still hold open jobs 30s after every job ended: %s", stale)
			break
		}
		time.Sleep(200 * time.Millisecond) // polling interval
	}
	t.Logf("%d jobs, %d GPUs used, in %s", len(order), len(byGPU), time.Since(began).Round(time.Millisecond))
}

// soakCount counts to 8, a quarter second a step, keeping the count in its
// checkpoint (written to a temporary file and renamed, as a checkpoint must
// be: the provider may take the folder at any moment) and starting from the
// checkpoint when there is one.
const soakCount = `n=0
[ -f /ckpt/count ] && n=$(cat /ckpt/count)
echo "start at $n"
while [ "$n" -lt 8 ]; do n=$((n+1)); echo "$n" > /ckpt/count.tmp; mv /ckpt/count.tmp /ckpt/count; sleep 0.25; done
echo "$n" > /out/final`

// soakMaxResumes is the max_resumes of every soak job: the most a
// declaration may ask, and the most kills the killer makes, so that
// whatever providers the dice pick, no chain can run out of resumes: each
// kill ends at most one lease of a chain.
const soakMaxResumes = market.MaxResumesCap

// soakJobs is the number of jobs TestSoak submits: E31_SOAK_JOBS, else 40
// with -short, else 200.
func soakJobs(t *testing.T) int { return jobCount(t, "E31_SOAK_JOBS", 40, 200) }

// killer kills a random provider every interval and restarts it after
// down, until stopped or it has killed most times; the cadence is load,
// not synchronisation. One goroutine does every kill and restart, so that
// the cluster is never changed from two at once; several providers may be
// down together.
type killer struct {
	stop chan struct{}
	done chan struct{}
	// Written by the killer's goroutine, read after done is closed.
	victims  []int
	errs     []string
	lastBack time.Time // when the last restart returned
}

func startKiller(c *cluster.Cluster, providers []int, every, down time.Duration, most int) *killer {
	k := &killer{stop: make(chan struct{}), done: make(chan struct{})}
	type comeback struct {
		node int
		at   time.Time
	}
	restart := func(i int) {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		if err := c.Restart(ctx, i); err != nil {
			k.errs = append(k.errs, fmt.Sprintf("restart node%d: %v", i, err))
		}
		k.lastBack = time.Now()
	}
	go func() {
		defer close(k.done)
		var back []comeback // in the order they are due
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			var due <-chan time.Time
			if len(back) > 0 {
				due = time.After(time.Until(back[0].at))
			}
			select {
			case <-k.stop:
				// Every node comes back, so that it settles what it left
				// open.
				for _, b := range back {
					restart(b.node)
				}
				return
			case <-due:
				restart(back[0].node)
				back = back[1:]
			case <-tick.C:
				var up []int
				for _, i := range providers {
					if !slices.ContainsFunc(back, func(b comeback) bool { return b.node == i }) {
						up = append(up, i)
					}
				}
				if len(up) == 0 || len(k.victims) >= most {
					continue
				}
				i := up[rand.IntN(len(up))]
				if err := c.Kill(i); err != nil {
					k.errs = append(k.errs, fmt.Sprintf("kill node%d: %v", i, err))
					continue
				}
				k.victims = append(k.victims, i)
				back = append(back, comeback{i, time.Now().Add(down)})
			}
		}
	}()
	return k
}

// halt stops the killer once and waits for its last restart.
func (k *killer) halt() {
	select {
	case <-k.stop:
	default:
		close(k.stop)
	}
	<-k.done
}

// soakChain is one submitted job and the automatic resumes that continue it.
type soakChain struct {
	jobs []string // the original first, then each resume
	// multiple is set when a job in the chain has more than one resume.
	multiple string
}

// soakChains follows each original's resumes through byID.
func soakChains(originals []string, byID map[string]api.Job) []soakChain {
	children := map[string][]string{}
	for id, j := range byID {
		if j.ResumeOf != "" {
			children[j.ResumeOf] = append(children[j.ResumeOf], id)
		}
	}
	out := make([]soakChain, len(originals))
	for k, id := range originals {
		ch := soakChain{jobs: []string{id}}
		for cur := id; len(children[cur]) > 0; {
			kids := children[cur]
			if len(kids) > 1 {
				slices.Sort(kids)
				ch.multiple = fmt.Sprintf("job %s was resumed %d times: %v", cur, len(kids), kids)
			}
			cur = kids[0]
			ch.jobs = append(ch.jobs, cur)
		}
		out[k] = ch
	}
	return out
}

// settled reports whether a chain will not change any more: its last job
// has ended, and an automatic resume, if one is due, has had time to
// appear (the submitter resumes at the moment it ends the lease).
func (ch soakChain) settled(byID map[string]api.Job, now time.Time) bool {
	last := byID[ch.jobs[len(ch.jobs)-1]]
	if !ended(last) {
		return false
	}
	if last.Outcome == string(ledger.OutcomeCompleted) && last.Output == "" {
		// Completed while this node was too busy to take the output at
		// once: the provider keeps it and hands it over when asked again.
		return false
	}
	if last.Outcome == string(ledger.OutcomeProviderLost) && last.Checkpoint != "" && len(ch.jobs)-1 < soakMaxResumes {
		return now.Sub(stepAt(last, "release")) > 3*time.Second
	}
	return true
}

// Jobs that checkpoint and ask to be resumed automatically, on providers
// killed with kill -9 and restarted again and again: every job completes,
// directly or through its resumes, or fails with a receipt; no job is leased
// twice (but for a lease given up before its run started, which holds no
// time), no GPU is held by two leases or at the end, and every ledger
// verifies.
func TestSoak(t *testing.T) {
	n := soakJobs(t)
	spec := []string{""}
	var providers []int
	for i := 1; i < 10; i++ {
		spec = append(spec, "2xH100:80GiB")
		providers = append(providers, i)
	}
	c := start(t, cluster.Options{
		N:             10,
		SimGPUsByNode: spec,
		Heartbeat:     500 * time.Millisecond,
		// A lease that does not settle says why only at debug level.
		Args: []string{"--epoch", "250ms", "--receipt-interval", "1s", "--provider-lost-after", "4s", "--grace", "1s", "--log-level", "debug"},
	})
	keepLogsOnFailure(t, c)
	// Only node0 is talked to while the killer runs: it is never killed.
	sub := c.Client(0)
	ctx := context.Background()

	began := time.Now()
	originals := make([]string, 0, n)
	for i := range n {
		d := decl(fmt.Sprintf("soak-%d", i), soakCount, 1, time.Minute)
		d.Request.Memory = 64 * market.MiB
		d.Output.Checkpoints = &market.Checkpoints{Path: "/ckpt", Every: market.Duration(500), Resume: market.ResumeAuto, MaxResumes: soakMaxResumes}
		originals = append(originals, submit(t, sub, d).ID)
	}
	t.Logf("%d jobs submitted in %s", n, time.Since(began).Round(time.Millisecond))

	k := startKiller(c, providers, 2*time.Second, 2*time.Second, soakMaxResumes)
	t.Cleanup(k.halt) // before the cluster stops
	var stoppedKilling time.Duration

	deadline := 8 * time.Minute
	if n > 200 {
		deadline = deadline * time.Duration(n) / 200
	}
	ctxW, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	byID := map[string]api.Job{}
	var chains []soakChain
	lastReport := time.Now()
	// A job stuck for good would otherwise cost the whole deadline: the
	// soak also ends when no job has ended for soakStall.
	const soakStall = 2 * time.Minute
	prog := newProgress()
	stuckAll := func(why string, err error) {
		k.halt()
		var stuck []string
		now := time.Now()
		for _, ch := range chains {
			if !ch.settled(byID, now) {
				stuck = append(stuck, ch.jobs[len(ch.jobs)-1])
			}
		}
		t.Fatalf("%s: %d of %d jobs have not ended (last error %v); the first stuck:\n%s",
			why, len(stuck), n, err, describeJobs(c, byID, stuck, 5))
	}
	for {
		list, err := sub.Attempts(ctxW)
		if err == nil {
			clear(byID)
			for _, j := range list {
				byID[j.ID] = j
			}
			chains = soakChains(originals, byID)
			now := time.Now()
			done := 0
			for _, ch := range chains {
				if ch.settled(byID, now) {
					done++
				}
			}
			prog.note(done)
			if stoppedKilling == 0 && done*5 >= n*4 {
				k.halt()
				stoppedKilling = time.Since(began)
				t.Logf("%d of %d jobs ended after %s: no more kills (%d so far)", done, n, stoppedKilling.Round(time.Millisecond), len(k.victims))
			}
			if done == n {
				break
			}
			if time.Since(lastReport) > 30*time.Second {
				states := map[string]int{}
				for _, j := range byID {
					states[string(j.State)+"/"+j.Outcome]++
				}
				t.Logf("after %s: %d of %d chains settled; jobs %v", time.Since(began).Round(time.Second), done, n, states)
				lastReport = time.Now()
			}
		}
		if prog.stalled(soakStall) {
			stuckAll(fmt.Sprintf("no job ended for %s", soakStall), err)
		}
		select {
		case <-ctxW.Done():
			stuckAll(fmt.Sprintf("after %s", deadline), err)
		case <-time.After(500 * time.Millisecond):
		}
	}
	wall := time.Since(began)
	k.halt()
	if stoppedKilling == 0 {
		stoppedKilling = wall
	}
	var victims []string
	for _, v := range k.victims {
		victims = append(victims, c.Nodes[v].Name)
	}
	t.Logf("%d kills -9 in the first %s: %s", len(k.victims), stoppedKilling.Round(time.Millisecond), strings.Join(victims, " "))
	for _, e := range k.errs {
		t.Errorf("a provider did not come back: %s", e)
	}

	// Every original ended completed, directly or through its resumes, or
	// failed.
	var completed, resumed, failed, resumes int
	var lost []string
	for _, ch := range chains {
		resumes += len(ch.jobs) - 1
		if ch.multiple != "" {
			t.Errorf("%s\n%s", ch.multiple, describeJobs(c, byID, ch.jobs, 3))
		}
		last := byID[ch.jobs[len(ch.jobs)-1]]
		switch {
		case last.Outcome == string(ledger.OutcomeCompleted) && len(ch.jobs) == 1:
			completed++
		case last.Outcome == string(ledger.OutcomeCompleted):
			resumed++
		case last.Outcome == string(ledger.OutcomeFailed):
			failed++
		default:
			why := "no checkpoint to resume from"
			switch {
			case last.Outcome != string(ledger.OutcomeProviderLost):
				why = "not a provider loss"
			case len(ch.jobs)-1 >= soakMaxResumes:
				why = "resumes used up"
			case last.Checkpoint != "":
				why = "not resumed although it has a checkpoint"
			}
			lost = append(lost, fmt.Sprintf("%s ended %s/%s after %d resumes (%s; reason %q)", last.ID, last.Outcome, last.Attribution, len(ch.jobs)-1, why, last.Reason))
			if len(lost) <= 5 {
				t.Errorf("job %s: chain %v ends %s/%s: %s (reason %q)\n%s", ch.jobs[0], ch.jobs, last.Outcome, last.Attribution, why, last.Reason, describeJobs(c, byID, ch.jobs[len(ch.jobs)-1:], 1))
			}
		}
	}
	t.Logf("soak: %d jobs in %s (%.2f jobs/s): %d completed, %d completed through resumes, %d failed, %d neither; %d automatic resumes in all",
		n, wall.Round(time.Millisecond), float64(n)/wall.Seconds(), completed, resumed, failed, len(lost), resumes)
	if len(lost) > 0 {
		byWhy := map[string]int{}
		for _, l := range lost {
			_, why, _ := strings.Cut(l, "(")
			why, _, _ = strings.Cut(why, ";")
			byWhy[why]++
		}
		t.Errorf("%d jobs neither completed nor failed: %v", len(lost), byWhy)
	}

	// Receipts: every released job has receipts on its submitter signed by
	// both; a completed or failed one has exactly one final receipt, and
	// no job has more than one lease anywhere.
	all := allLedgers(t, c) // every ledger verifies
	leases := leasesOfJobs(c, all)
	bySubmitter := map[string][]ledger.Receipt{}
	for _, r := range all[0] {
		bySubmitter[r.Job] = append(bySubmitter[r.Job], r)
	}
	byLease := map[string][]ledger.Receipt{} // on every ledger
	for _, rs := range all {
		for _, r := range rs {
			byLease[r.Lease] = append(byLease[r.Lease], r)
		}
	}
	byGPU := map[string][]gpuHold{}
	noReceipt := 0
	for id, j := range byID {
		// A lease given up before its run started (its provider went
		// silent) leaves the submitter's zero-length record, and the job
		// goes back to the queue under the same ID. Its provider, if it
		// comes back, may hold its own one-sided record of the lease; no
		// receipt of it is signed by both.
		rs := slices.DeleteFunc(slices.Clone(bySubmitter[id]), func(r ledger.Receipt) bool { return givenUpUnstarted(r, j.Lease) })
		ls := maps.Clone(leases[id])
		for _, r := range bySubmitter[id] {
			if givenUpUnstarted(r, j.Lease) && !slices.ContainsFunc(byLease[r.Lease], func(o ledger.Receipt) bool { return o.Signer == "" }) {
				delete(ls, r.Lease)
			}
		}
		if len(ls) > 1 || (len(ls) == 1 && len(ls[j.Lease]) == 0) {
			t.Errorf("job %s (lease %s) has receipts of %d leases: %v\n%s", id, j.Lease, len(ls), leases[id], describeJobs(c, byID, []string{id}, 1))
		}
		if j.State != api.JobReleased {
			continue
		}
		if len(rs) == 0 {
			noReceipt++
			if noReceipt <= 5 {
				t.Errorf("released job %s (%s/%s, reason %q) has no receipt on its submitter\n%s", id, j.Outcome, j.Attribution, j.Reason, describeJobs(c, byID, []string{id}, 1))
			}
			continue
		}
		// The final record that counts: the receipt both signed, else this
		// side's own record of a lease whose provider it lost.
		var finals, oneSided []ledger.Receipt
		from, until := rs[0].HeldFrom, rs[0].HeldUntil
		for _, r := range rs {
			if err := r.Verify(); err != nil {
				t.Errorf("job %s: receipt %d of lease %s does not verify: %v", id, r.Seq, r.Lease, err)
			}
			switch {
			case r.Final && r.Signer == "":
				finals = append(finals, r)
			case r.Final:
				oneSided = append(oneSided, r)
			}
			if r.HeldFrom.Before(from) {
				from = r.HeldFrom
			}
			if r.HeldUntil.After(until) {
				until = r.HeldUntil
			}
		}
		if len(finals) > 1 || len(oneSided) > 1 || (len(finals) == 0 && (j.Outcome == string(ledger.OutcomeCompleted) || j.Outcome == string(ledger.OutcomeFailed))) {
			t.Errorf("job %s ended %s with %d final receipts signed by both and %d one-sided on its submitter", id, j.Outcome, len(finals), len(oneSided))
		}
		counted := append(finals, oneSided...)
		if len(counted) > 0 && string(counted[0].Outcome) != j.Outcome {
			t.Errorf("job %s ended %s, its final record says %s", id, j.Outcome, counted[0].Outcome)
		}
		for _, g := range j.GPUs {
			byGPU[g] = append(byGPU[g], gpuHold{id, from, until})
		}
	}
	if noReceipt > 0 {
		t.Errorf("%d released jobs have no receipt on their submitter", noReceipt)
	}
	checkNoOverlap(t, c, byID, byGPU)

	// Every completed resumption went on from the checkpoint it was
	// resumed from, found at its own checkpoint path: its log says where it
	// started, and that must be the count its parent last checkpointed.
	var pastZero, fromStart int
	var starts []string
	// The job as submitted is its first attempt's ID too, and names the
	// whole job: an attempt's own checkpoint is asked for by its number.
	readCount := func(job string, attempt int, checkpoint bool) (string, string, error) {
		dir := filepath.Join(t.TempDir(), "get")
		if _, err := sub.Get(ctx, job, api.GetRequest{Dir: dir, Checkpoint: checkpoint, Attempt: attempt}); err != nil {
			return "", "", err
		}
		if checkpoint {
			b, _ := os.ReadFile(filepath.Join(dir, "count"))
			return strings.TrimSpace(string(b)), "", nil
		}
		final, _ := os.ReadFile(filepath.Join(dir, "out", "final"))
		logs, _ := os.ReadFile(filepath.Join(dir, "stdout.log"))
		return strings.TrimSpace(string(final)), strings.TrimSpace(string(logs)), nil
	}
	for _, ch := range chains {
		last := byID[ch.jobs[len(ch.jobs)-1]]
		if len(ch.jobs) == 1 || last.Outcome != string(ledger.OutcomeCompleted) {
			continue
		}
		final, logs, err := readCount(ch.jobs[0], len(ch.jobs), false)
		if err != nil {
			t.Errorf("get %s: %v", last.ID, err)
			continue
		}
		if final != "8" || !strings.HasPrefix(logs, "start at ") {
			t.Errorf("resumed job %s: final count %q, log %q", last.ID, final, logs)
			continue
		}
		started := strings.TrimPrefix(strings.SplitN(logs, "\n", 2)[0], "start at ")
		// It resumes from the nearest job before it in the chain that
		// checkpointed: a resumption lost before its own first checkpoint
		// passes on the one it was resumed from.
		want, from := "0", ""
		for k := len(ch.jobs) - 2; k >= 0; k-- {
			if a := byID[ch.jobs[k]]; a.Checkpoint != "" {
				from = a.ID
				if want, _, err = readCount(ch.jobs[0], k+1, true); err != nil {
					t.Errorf("checkpoint of %s: %v", a.ID, err)
				}
				if want == "" {
					// Taken before the first count was written (a run
					// slow to start under the load): the job starts at 0.
					want = "0"
				}
				break
			}
		}
		if started != want {
			t.Errorf("resumed job %s started at %s, but the last checkpoint before it (of %q) says %q", last.ID, started, from, want)
		}
		if started == "0" {
			fromStart++
		} else {
			pastZero++
		}
		starts = append(starts, started)
	}
	t.Logf("completed resumptions: %d went on from their checkpoint (started past zero), %d started over (no count checkpointed yet); starts %v", pastZero, fromStart, starts)

	// Every provider is back in every view, so that "all free" below
	// speaks of all of them.
	ctxC, cancelC := context.WithTimeout(ctx, 90*time.Second)
	defer cancelC()
	if err := c.WaitConverged(ctxC); err != nil {
		everyone := make([]int, len(c.Nodes))
		for i := range everyone {
			everyone[i] = i
		}
		t.Errorf("restarted providers are not back in every view %s after the last restart: %v\n%s",
			time.Since(k.lastBack).Round(time.Second), err, connectivity(c, everyone))
	} else if !k.lastBack.IsZero() {
		t.Logf("every view holds all 9 providers %s after the last restart", time.Since(k.lastBack).Round(time.Millisecond))
	}
	waitAllFree(t, c, 60*time.Second)
	t.Logf("soak done in %s (the kills stopped at %s)", time.Since(began).Round(time.Millisecond), stoppedKilling.Round(time.Millisecond))
}
