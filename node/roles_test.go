package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/e31network/e31/exec"
	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/provider"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/testnet/poll"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// The tests in this file run the provider's and the submitter's state
// machines in one process: real libp2p hosts on 127.0.0.1, real gossipsub,
// real Badger stores in temp dirs; only the sandbox is a fake (fakeRunner),
// so they need neither root nor runc. Faults are injected where the wire
// would lose them: a reply dropped after its handler ran.

// fakeRunner stands in for the OCI sandbox: a run writes its output and
// checkpoint, then waits for the gate (or its context).
type fakeRunner struct {
	gate    chan struct{} // closed: runs end at once
	started chan string   // lease IDs, as runs start
	sweeps  atomic.Int32
}

func newFakeRunner(open bool) *fakeRunner {
	r := &fakeRunner{gate: make(chan struct{}), started: make(chan string, 64)}
	if open {
		close(r.gate)
	}
	return r
}

func (r *fakeRunner) Run(ctx context.Context, s exec.Spec) (exec.Result, error) {
	res := exec.Result{Started: time.Now(), Stdout: filepath.Join(s.Dir, "stdout.log"), Stderr: filepath.Join(s.Dir, "stderr.log")}
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return res, err
	}
	if err := os.MkdirAll(s.Output.Source, 0o755); err != nil {
		return res, err
	}
	if err := os.WriteFile(filepath.Join(s.Output.Source, "result.txt"), []byte("done "+s.ID), 0o644); err != nil {
		return res, err
	}
	if s.Checkpoint != nil {
		if err := os.MkdirAll(s.Checkpoint.Source, 0o755); err != nil {
			return res, err
		}
		if err := os.WriteFile(filepath.Join(s.Checkpoint.Source, "n"), []byte("1"), 0o644); err != nil {
			return res, err
		}
	}
	if err := os.WriteFile(res.Stdout, []byte("hello\n"), 0o644); err != nil {
		return res, err
	}
	select {
	case r.started <- s.ID:
	default:
	}
	select {
	case <-r.gate:
		res.Outcome, res.ExitCode = exec.Completed, 0
	case <-ctx.Done():
		res.Outcome, res.ExitCode, res.Attribution = exec.Stopped, 137, exec.ByProvider
	}
	res.Ended = time.Now()
	return res, nil
}

func (r *fakeRunner) Cleanup(context.Context, string, string) error { return nil }

func (r *fakeRunner) Sweep(context.Context, func(string) bool) error {
	r.sweeps.Add(1)
	return nil
}

// testNode is a node running in this process.
type testNode struct {
	*Node
	dir    string
	cancel context.CancelFunc
	done   chan struct{} // closed when Run returns
	err    error         // what Run returned
}

// stop stops the node and waits for Run to return.
func (tn *testNode) stop(t *testing.T) {
	t.Helper()
	tn.cancel()
	select {
	case <-tn.done:
		if tn.err != nil {
			t.Errorf("run: %v", tn.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("node did not stop within 30s")
	}
}

// nodeOpts are what a test varies between nodes.
type nodeOpts struct {
	dir       string // reuse a data dir (a restart); default a new one
	gpus      string // --sim-gpus; empty: a submitter only
	runner    *fakeRunner
	sandbox   provider.Runner // a runner of another kind, when runner is nil
	boot      []string
	loseReply func(proto protocol.ID, from peer.ID) bool
	epoch     time.Duration // default 100ms
	noFast    bool          // turn the fast path off
	seeGPUs   func(context.Context) []exec.GPU
	heartbeat time.Duration // default 200ms
}

func startNode(t *testing.T, o nodeOpts) *testNode {
	t.Helper()
	if o.dir == "" {
		o.dir = t.TempDir()
	}
	cfg := Config{
		DataDir:           o.dir,
		Listen:            []string{"/ip4/127.0.0.1/tcp/0"},
		Bootstrap:         o.boot,
		API:               "127.0.0.1:0",
		SimGPUs:           o.gpus,
		Heartbeat:         200 * time.Millisecond,
		Epoch:             100 * time.Millisecond,
		EpochDelay:        30 * time.Millisecond,
		ProposalTTL:       2 * time.Second,
		ReceiptInterval:   300 * time.Millisecond,
		Grace:             time.Second,
		OutputTimeout:     3 * time.Second,
		Retention:         time.Minute,
		ProviderLostAfter: 2 * time.Second,
		ShutdownTimeout:   10 * time.Second,
		// A node stopped here plays one that vanished: its leases are
		// lost with it, not drained (e2e tests drain real daemons).
		StopDrain:     -1,
		CPUs:          8,
		MemoryBytes:   16 << 30,
		testLoseReply: o.loseReply,
		NoFastPath:    o.noFast,
		testSeeGPUs:   o.seeGPUs,
		// The tests' jobs write nothing on disks that are not there: the
		// data dir's filesystem, whatever the machine's, grants them alike.
		DebugDiskFree: 1 << 40,
	}
	if o.epoch != 0 {
		cfg.Epoch = o.epoch
	}
	if o.heartbeat != 0 {
		cfg.Heartbeat = o.heartbeat
	}
	if o.runner != nil {
		cfg.testRunner = o.runner
	} else if o.sandbox != nil {
		cfg.testRunner = o.sandbox
	}
	ctx, cancel := context.WithCancel(context.Background())
	n, err := New(ctx, cfg)
	if err != nil {
		cancel()
		t.Fatalf("new node: %v", err)
	}
	tn := &testNode{Node: n, dir: o.dir, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(tn.done)
		tn.err = n.Run(ctx)
	}()
	t.Cleanup(func() {
		tn.cancel()
		<-tn.done
	})
	return tn
}

// pair starts a provider with one simulated GPU and a submitter that
// bootstraps to it, and waits until the submitter sees the offer.
func pair(t *testing.T, runner *fakeRunner, subLose func(protocol.ID, peer.ID) bool) (prov, sub *testNode) {
	t.Helper()
	prov = startNode(t, nodeOpts{gpus: "1xH100:80GiB", runner: runner})
	poll.Until(t, "provider ready", 10*time.Second, func() bool { return len(prov.Addrs()) > 0 })
	sub = startNode(t, nodeOpts{boot: prov.Addrs()[:1], loseReply: subLose})
	poll.Until(t, "the submitter to see the provider's offer", 15*time.Second, func() bool { return len(sub.net.Nodes()) == 1 })
	return prov, sub
}

const testJob = `name: t
work: {command: ["sh", "-c", "echo hi"]}
request: {gpus: 1, cpus: 1, memory: 1GiB, limit: 1h}
output:
  path: /out
  checkpoints: {path: /ckpt, every: 1m, resume: auto}
`

func submit(t *testing.T, n *testNode) string {
	t.Helper()
	j, err := n.submitter.Submit(context.Background(), api.SubmitRequest{Declaration: []byte(testJob)}, nil)
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	return j.ID
}

func job(t *testing.T, n *testNode, id string) api.Job {
	t.Helper()
	j, err := n.submitter.Job(id)
	if err != nil {
		t.Fatalf("job %s: %v", id, err)
	}
	return j
}

func waitState(t *testing.T, n *testNode, id string, st api.JobState, within time.Duration) api.Job {
	t.Helper()
	poll.Until(t, fmt.Sprintf("job %s %s", id, st), within, func() bool { return job(t, n, id).State == st })
	return job(t, n, id)
}

// finalReceipt returns the final receipt of a lease in a node's ledger.
func finalReceipt(t *testing.T, n *testNode, lease string) (ledger.Receipt, bool) {
	t.Helper()
	es, err := n.ledger.ByLease(context.Background(), lease)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) == 0 || !es[len(es)-1].Receipt.Final {
		return ledger.Receipt{}, false
	}
	return es[len(es)-1].Receipt, true
}

func verifyLedger(t *testing.T, n *testNode) {
	t.Helper()
	rep, err := n.ledger.Verify(context.Background())
	if err != nil || !rep.OK {
		t.Fatalf("ledger does not verify: %v %+v", err, rep.FirstBad)
	}
}

func TestRolesLeaseRunsToRelease(t *testing.T) {
	prov, sub := pair(t, newFakeRunner(true), nil)
	id := submit(t, sub)
	j := waitState(t, sub, id, api.JobReleased, 30*time.Second)
	if j.Outcome != string(ledger.OutcomeCompleted) || j.Attribution != string(ledger.AttributionJob) || j.Output == "" {
		t.Fatalf("job ended %s/%s with output %q", j.Outcome, j.Attribution, j.Output)
	}
	var steps []api.StepName
	for _, s := range j.Steps {
		steps = append(steps, s.Step)
	}
	if fmt.Sprint(steps) != fmt.Sprint(api.Steps[:]) {
		t.Fatalf("steps %v, want %v", steps, api.Steps)
	}
	poll.Until(t, "the provider's final receipt", 10*time.Second, func() bool { _, ok := finalReceipt(t, prov, j.Lease); return ok })
	pr, _ := finalReceipt(t, prov, j.Lease)
	sr, ok := finalReceipt(t, sub, j.Lease)
	if !ok || pr.Digest() != sr.Digest() {
		t.Fatalf("the two ledgers end the lease differently: %v", ok)
	}
	if c := prov.provider.Counts(); c.Held != 0 || c.Leases != 0 {
		t.Fatalf("provider still holds %d GPUs in %d leases", c.Held, c.Leases)
	}
	verifyLedger(t, prov)
	verifyLedger(t, sub)
}

// The run and output steps ride on the receipts and the output request: the
// submitter records every step, and the only event call of the lease is the
// checkpoint's (the fake runner writes one).
func TestRolesStepsNeedNoEventCalls(t *testing.T) {
	var mu sync.Mutex
	calls := map[protocol.ID]int{}
	count := func(proto protocol.ID, _ peer.ID) bool {
		mu.Lock()
		defer mu.Unlock()
		calls[proto]++
		return false
	}
	_, sub := pair(t, newFakeRunner(true), count)
	id := submit(t, sub)
	j := waitState(t, sub, id, api.JobReleased, 30*time.Second)
	var steps []api.StepName
	for _, s := range j.Steps {
		steps = append(steps, s.Step)
	}
	if fmt.Sprint(steps) != fmt.Sprint(api.Steps[:]) {
		t.Fatalf("steps %v, want %v", steps, api.Steps)
	}
	if run, out := stepTime(j, api.StepRun), stepTime(j, api.StepOutput); out.Before(run) {
		t.Fatalf("output step %v before run step %v", out, run)
	}
	// The job is released once its output is fetched; the final receipt
	// may still be on its way.
	poll.Until(t, "the final receipt's call", 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return calls[wire.ProtoReceipt] >= 2
	})
	mu.Lock()
	defer mu.Unlock()
	if calls[wire.ProtoEvent] != 1 || calls[wire.ProtoOutput] != 1 {
		t.Fatalf("calls to the submitter %v: want 1 event (the checkpoint), 1 output, at least 2 receipts", calls)
	}
}

func stepTime(j api.Job, name api.StepName) time.Time {
	for _, s := range j.Steps {
		if s.Step == name {
			return s.At
		}
	}
	return time.Time{}
}

// A withdrawal at any moment ends the job withdrawn, and leaves no GPU held.
func TestRolesWithdrawalRace(t *testing.T) {
	runner := newFakeRunner(false)
	prov, sub := pair(t, runner, nil)
	for i, delay := range []time.Duration{0, 50 * time.Millisecond, 150 * time.Millisecond, 400 * time.Millisecond} {
		id := submit(t, sub)
		time.Sleep(delay) // the moment of the withdrawal is what this test varies
		if _, err := sub.submitter.Withdraw(context.Background(), id); err != nil {
			t.Fatalf("withdraw %d: %v", i, err)
		}
		poll.Until(t, "the job to end", 20*time.Second, func() bool { return job(t, sub, id).State.Terminal() })
		j := job(t, sub, id)
		if j.Outcome != string(ledger.OutcomeWithdrawn) || j.Attribution != string(ledger.AttributionSubmitter) {
			t.Fatalf("withdrawal %d (after %s): ended %s %s/%s", i, delay, j.State, j.Outcome, j.Attribution)
		}
		poll.Until(t, "the provider's GPU to be free", 10*time.Second, func() bool { return prov.provider.Counts().Held == 0 })
	}
}

// The submitter countersigns but its reply is lost: the provider never
// holds the lease, the submitter puts the job back in the queue when no
// lease is announced, and the next proposal goes through.
func TestRolesLostCountersignature(t *testing.T) {
	var lost atomic.Int32
	lose := func(proto protocol.ID, _ peer.ID) bool {
		return proto == wire.ProtoLease && lost.Add(1) == 1
	}
	prov, sub := pair(t, newFakeRunner(true), lose)
	id := submit(t, sub)
	poll.Until(t, "the first countersignature to be lost", 10*time.Second, func() bool { return lost.Load() >= 1 })
	first := job(t, sub, id)
	j := waitState(t, sub, id, api.JobReleased, 40*time.Second)
	if j.Outcome != string(ledger.OutcomeCompleted) {
		t.Fatalf("job ended %s", j.Outcome)
	}
	if first.Lease != "" && first.Lease == j.Lease {
		t.Fatalf("the lease whose countersignature was lost (%s) is the one that ran", first.Lease)
	}
	if es, _ := sub.ledger.ByLease(context.Background(), first.Lease); first.Lease != "" && len(es) != 0 {
		t.Fatalf("%d receipts for the lease that never started", len(es))
	}
	if c := prov.provider.Counts(); c.Held != 0 {
		t.Fatalf("provider holds %d GPUs", c.Held)
	}
}

// The submitter's reply to a receipt is lost: the provider tries again,
// adopts what the submitter countersigned, and the two chains agree.
func TestRolesReceiptRetry(t *testing.T) {
	var lost atomic.Int32
	lose := func(proto protocol.ID, _ peer.ID) bool {
		return proto == wire.ProtoReceipt && lost.Add(1) <= 2
	}
	runner := newFakeRunner(false)
	prov, sub := pair(t, runner, lose)
	id := submit(t, sub)
	poll.Until(t, "two receipt replies lost", 20*time.Second, func() bool { return lost.Load() >= 3 })
	close(runner.gate)
	j := waitState(t, sub, id, api.JobReleased, 30*time.Second)
	poll.Until(t, "the provider's final receipt", 10*time.Second, func() bool { _, ok := finalReceipt(t, prov, j.Lease); return ok })
	pes, _ := prov.ledger.ByLease(context.Background(), j.Lease)
	ses, _ := sub.ledger.ByLease(context.Background(), j.Lease)
	if len(pes) != len(ses) {
		t.Fatalf("provider has %d receipts of the lease, submitter %d", len(pes), len(ses))
	}
	for i := range pes {
		if pes[i].Receipt.Digest() != ses[i].Receipt.Digest() {
			t.Fatalf("receipt %d differs between the ledgers", i)
		}
	}
	verifyLedger(t, prov)
	verifyLedger(t, sub)
}

// A provider restarted while a job runs, or while its output waits for the
// submitter, ends the lease provider-lost and settles the final receipt
// with the submitter once it is back.
func TestRolesProviderRestart(t *testing.T) {
	for _, step := range []string{"running", "output"} {
		t.Run(step, func(t *testing.T) {
			var blockOutput atomic.Bool
			lose := func(proto protocol.ID, _ peer.ID) bool { return proto == wire.ProtoOutput && blockOutput.Load() }
			runner := newFakeRunner(step == "output")
			blockOutput.Store(step == "output")
			prov, sub := pair(t, runner, lose)
			id := submit(t, sub)
			lease := ""
			select {
			case lease = <-runner.started:
			case <-time.After(20 * time.Second):
				t.Fatal("the run never started")
			}
			if step == "output" {
				poll.Until(t, "the output step", 10*time.Second, func() bool { return job(t, sub, id).State == api.JobOutput })
			}
			dir := prov.dir
			prov.stop(t)
			blockOutput.Store(false)
			prov2 := startNode(t, nodeOpts{dir: dir, gpus: "1xH100:80GiB", runner: newFakeRunner(true), boot: sub.Addrs()[:1]})
			j := waitState(t, sub, id, api.JobReleased, 30*time.Second)
			if j.Lease != lease {
				t.Fatalf("released lease %s, ran %s", j.Lease, lease)
			}
			poll.Until(t, "both final receipts", 20*time.Second, func() bool {
				_, a := finalReceipt(t, prov2, lease)
				_, b := finalReceipt(t, sub, lease)
				return a && b
			})
			r, _ := finalReceipt(t, sub, lease)
			if step == "running" && (r.Outcome != ledger.OutcomeProviderLost || r.Attribution != ledger.AttributionProvider) {
				t.Fatalf("a lease stopped by its provider mid-run ended %s/%s", r.Outcome, r.Attribution)
			}
			if c := prov2.provider.Counts(); c.Held != 0 || c.Leases != 0 {
				t.Fatalf("restarted provider holds %d GPUs in %d leases", c.Held, c.Leases)
			}
			verifyLedger(t, prov2)
			verifyLedger(t, sub)
		})
	}
}

// A provider that goes silent loses its lease on the submitter's side; the
// job, declared with resume: auto, runs again on another provider.
func TestRolesProviderLostAndResumed(t *testing.T) {
	runner := newFakeRunner(false)
	prov, sub := pair(t, runner, nil)
	id := submit(t, sub)
	select {
	case <-runner.started:
	case <-time.After(20 * time.Second):
		t.Fatal("the run never started")
	}
	other := startNode(t, nodeOpts{gpus: "1xA100:40GiB", runner: newFakeRunner(true), boot: sub.Addrs()[:1]})
	poll.Until(t, "the submitter to see both providers", 15*time.Second, func() bool { return len(sub.net.Nodes()) == 2 })
	prov.stop(t) // silent from now on
	// Followed under the ID it was submitted with, the job is queued, not
	// ended, while it is resumed, and ends as its resumption does.
	j := waitState(t, sub, id, api.JobReleased, 50*time.Second)
	if len(j.Attempts) != 2 {
		t.Fatalf("the job ended with %d attempts", len(j.Attempts))
	}
	if a := j.Attempts[0]; a.Outcome != string(ledger.OutcomeProviderLost) || a.Attribution != string(ledger.AttributionProvider) {
		t.Fatalf("the first attempt ended %s/%s", a.Outcome, a.Attribution)
	}
	if j.Outcome != string(ledger.OutcomeCompleted) || j.Provider != other.self.String() || j.Attempts[1].Provider != j.Provider {
		t.Fatalf("the job ended %s on %s", j.Outcome, j.Provider)
	}
}

// A provider that joins after a job was declared learns of it from the
// submitter's re-announcements and runs it.
func TestRolesRequeueReachesLateProvider(t *testing.T) {
	sub := startNode(t, nodeOpts{})
	poll.Until(t, "submitter ready", 10*time.Second, func() bool { return len(sub.Addrs()) > 0 })
	id := submit(t, sub) // announced while no provider can hear it
	startNode(t, nodeOpts{gpus: "1xH100:80GiB", runner: newFakeRunner(true), boot: sub.Addrs()[:1]})
	j := waitState(t, sub, id, api.JobReleased, 30*time.Second)
	if j.Outcome != string(ledger.OutcomeCompleted) {
		t.Fatalf("job ended %s", j.Outcome)
	}
}
