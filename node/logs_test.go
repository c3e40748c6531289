package node

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/e31network/e31/exec"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/submitter"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/e31network/e31/testnet/poll"
)

// lineRunner stands in for the sandbox of a job that writes its log over
// time: each string sent on lines is written to stdout.log as the job
// would; closing lines ends the run.
type lineRunner struct {
	lines   chan string
	started chan string
}

func newLineRunner() *lineRunner {
	return &lineRunner{lines: make(chan string), started: make(chan string, 8)}
}

func (r *lineRunner) Run(ctx context.Context, s exec.Spec) (exec.Result, error) {
	res := exec.Result{Started: time.Now(), Stdout: filepath.Join(s.Dir, "stdout.log"), Stderr: filepath.Join(s.Dir, "stderr.log")}
	for _, d := range []string{s.Dir, s.Output.Source} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return res, err
		}
	}
	out, err := os.Create(res.Stdout)
	if err != nil {
		return res, err
	}
	defer out.Close()
	if err := os.WriteFile(res.Stderr, []byte("warming up\n"), 0o644); err != nil {
		return res, err
	}
	r.started <- s.ID
	for {
		select {
		case line, ok := <-r.lines:
			if !ok {
				res.Outcome, res.Ended = exec.Completed, time.Now()
				return res, nil
			}
			if _, err := out.WriteString(line + "\n"); err != nil {
				return res, err
			}
		case <-ctx.Done():
			res.Outcome, res.ExitCode, res.Attribution, res.Ended = exec.Stopped, 137, exec.ByProvider, time.Now()
			return res, nil
		}
	}
}

func (r *lineRunner) Cleanup(context.Context, string, string) error  { return nil }
func (r *lineRunner) Sweep(context.Context, func(string) bool) error { return nil }

// logSink collects what a follower writes, so a test can wait for a line.
type logSink struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *logSink) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// apiClient is a client of a test node's local API.
func apiClient(t *testing.T, n *testNode) *api.Client {
	t.Helper()
	var info RunInfo
	poll.Until(t, "the node's run file", 10*time.Second, func() bool {
		b, err := os.ReadFile(filepath.Join(n.dir, RunFile))
		return err == nil && json.Unmarshal(b, &info) == nil && info.API != ""
	})
	tok, err := api.ReadToken(filepath.Join(n.dir, api.TokenFile))
	if err != nil {
		t.Fatal(err)
	}
	return api.NewClient(info.API, api.WithToken(tok))
}

// startLogPair starts a provider whose jobs write lines on demand and a
// submitter, and runs a job on them up to the point where it writes.
func startLogPair(t *testing.T) (prov, sub *testNode, runner *lineRunner, id string) {
	t.Helper()
	return startLogPairOf(t, testJob)
}

// startLogPairOf is startLogPair with a declaration of the caller's.
func startLogPairOf(t *testing.T, decl string) (prov, sub *testNode, runner *lineRunner, id string) {
	t.Helper()
	runner = newLineRunner()
	prov = startNode(t, nodeOpts{gpus: "1xH100:80GiB", sandbox: runner})
	poll.Until(t, "provider ready", 10*time.Second, func() bool { return len(prov.Addrs()) > 0 })
	sub = startNode(t, nodeOpts{boot: prov.Addrs()[:1]})
	poll.Until(t, "the submitter to see the provider's offer", 15*time.Second, func() bool { return len(sub.net.Nodes()) == 1 })
	j, err := sub.submitter.Submit(context.Background(), api.SubmitRequest{Declaration: []byte(decl)}, nil)
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	id = j.ID
	select {
	case <-runner.started:
	case <-time.After(30 * time.Second):
		t.Fatal("the job did not start within 30s")
	}
	return prov, sub, runner, id
}

// e31 logs -f, through the local API, sees each line of a running job as it
// is written, and ends when the run does; afterwards the same log comes from
// the output, whole.
func TestLogsFollowSeesLinesAsWritten(t *testing.T) {
	_, sub, runner, id := startLogPair(t)
	cl := apiClient(t, sub)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	var sink logSink
	done := make(chan error, 1)
	go func() { done <- cl.Logs(ctx, id, api.LogOptions{Follow: true}, &sink) }()

	var want strings.Builder
	for i := range 5 {
		line := fmt.Sprintf("step %d of 5", i)
		runner.lines <- line
		want.WriteString(line + "\n")
		// The next line is written only once the follower has this one:
		// what it sees comes while the job runs, not from the output.
		poll.Until(t, "the follower to print "+line, 10*time.Second, func() bool { return sink.String() == want.String() })
	}
	if j := job(t, sub, id); j.State != api.JobRunning {
		t.Fatalf("job %s while its lines were followed, want running", j.State)
	}
	close(runner.lines)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("follow ended with %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("follow did not end with the run")
	}
	if sink.String() != want.String() {
		t.Fatalf("follower printed %q, want %q", sink.String(), want.String())
	}

	waitState(t, sub, id, api.JobReleased, 30*time.Second)
	var all, tail, stderr bytes.Buffer
	if err := cl.Logs(ctx, id, api.LogOptions{}, &all); err != nil || all.String() != want.String() {
		t.Fatalf("log from the output = %q, %v; want %q", all.String(), err, want.String())
	}
	if err := cl.Logs(ctx, id, api.LogOptions{TailLines: 2}, &tail); err != nil || tail.String() != "step 3 of 5\nstep 4 of 5\n" {
		t.Fatalf("last 2 lines from the output = %q, %v", tail.String(), err)
	}
	if err := cl.Logs(ctx, id, api.LogOptions{Stream: "stderr"}, &stderr); err != nil || stderr.String() != "warming up\n" {
		t.Fatalf("stderr from the output = %q, %v", stderr.String(), err)
	}
}

// A follower whose provider dies is told so, and not left waiting, when
// the job will not be resumed.
func TestLogsFollowEndsWhenTheProviderDies(t *testing.T) {
	noResume := strings.Replace(testJob, ", resume: auto", "", 1)
	if noResume == testJob {
		t.Fatal("testJob no longer resumes itself: the test needs a new declaration")
	}
	prov, sub, runner, id := startLogPairOf(t, noResume)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var sink logSink
	done := make(chan error, 1)
	go func() { done <- sub.submitter.Logs(ctx, id, api.LogOptions{Follow: true}, &sink) }()
	runner.lines <- "before the crash"
	poll.Until(t, "the first line", 10*time.Second, func() bool { return sink.String() == "before the crash\n" })

	prov.cancel() // the provider goes away with the job still running
	select {
	case err := <-done:
		if !errors.Is(err, submitter.ErrLogLost) {
			t.Fatalf("follow ended with %v, want ErrLogLost", err)
		}
		t.Logf("the follower was told: %v", err)
	case <-time.After(40 * time.Second):
		t.Fatal("the follower was still waiting 40s after its provider died")
	}
	<-prov.done
}

// Only the job's submitter may read its log from the provider.
func TestLogsRefusedToOthers(t *testing.T) {
	prov, sub, runner, id := startLogPair(t)
	defer close(runner.lines)
	other := startNode(t, nodeOpts{boot: prov.Addrs()[:1]})
	poll.Until(t, "the stranger to see the provider", 15*time.Second, func() bool { return len(other.net.Nodes()) == 1 })
	j := job(t, sub, id)
	req := wire.LogsRequest{Lease: j.Lease, Job: j.ID, Stream: wire.StreamStdout}
	err := caller{other.Node}.Call(context.Background(), prov.self, wire.ProtoLogs, req, nil)
	if p2p.RefusalCode(err) != wire.CodeUnknownJob {
		t.Fatalf("a stranger's logs request: %v, want a refusal", err)
	}
}

// A follower of a job that resumes itself is told that its provider stopped
// answering, and goes on waiting for the resumption rather than ending.
func TestLogsFollowWaitsOutALostProvider(t *testing.T) {
	prov, sub, runner, id := startLogPair(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var sink logSink
	done := make(chan error, 1)
	go func() { done <- sub.submitter.Logs(ctx, id, api.LogOptions{Follow: true}, &sink) }()
	runner.lines <- "before the crash"
	poll.Until(t, "the first line", 10*time.Second, func() bool { return sink.String() == "before the crash\n" })

	prov.cancel()
	poll.Until(t, "the follower to be told the provider stopped answering", 40*time.Second, func() bool {
		return strings.Contains(sink.String(), "stopped answering") && strings.Contains(sink.String(), "resumes from its last checkpoint")
	})
	select {
	case err := <-done:
		t.Fatalf("the follower of a job that resumes itself ended with %v", err)
	default:
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("follow ended with %v once its context did, want context.Canceled", err)
	}
	<-prov.done
}
