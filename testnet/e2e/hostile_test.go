package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/testnet/cluster"
)

// hostileCaps are the providers' caps on what one layer, input, output or
// checkpoint may hold, set low so that the cases can pass them cheaply.
var hostileCaps = [][2]string{{"--max-entries", "1000"}, {"--max-depth", "256"}, {"--max-layer", "8MiB"}}

// hostileWant is how a hostile case must end.
type hostileWant struct {
	outcome, attribution string
	// reason: substrings the job's reason must hold, each; "a|b" takes
	// either.
	reason []string
	// reasonRE, when set, must match the reason too: the layer at fault,
	// by index and digest.
	reasonRE string
	// skipped: substrings of the job's skipped list (what its output left
	// out), each in some entry.
	skipped []string
	// note is what the case saw on its way (an honest submitter's
	// refusal), for the summary.
	note string
}

// hostileCase is one attack: a job that node 0, the hostile submitter,
// submits, and how it must end.
type hostileCase struct {
	name string
	// image cases need providers that run image jobs.
	image bool
	want  hostileWant
	// build prepares the case (files, DAGs posted raw, checks at submit)
	// and returns the declaration node 0 submits; it may refine want.
	build func(t *testing.T, h *hostileNet, w *hostileWant) market.Declaration
	// after, when set, checks more once the job ended as wanted.
	after func(t *testing.T, h *hostileNet, j api.Job)
}

// hostileNet is the network the cases run on.
type hostileNet struct {
	c      *cluster.Cluster
	sub    *api.Client // node 0: the hostile submitter
	honest *api.Client // node 1: an honest node, a provider
	dir    string      // the cases' files

	bbOnce sync.Once
	bb     ociLayer // busybox's layer, built once
}

// busybox is a layer holding busybox and busyboxApplets.
func (h *hostileNet) busybox(t *testing.T) ociLayer {
	h.bbOnce.Do(func() { h.bb = busyboxLayer(t, busyboxApplets...) })
	if h.bb.blob == nil {
		t.Fatal("no busybox layer")
	}
	return h.bb
}

// hostileRun is one case as it went.
type hostileRun struct {
	c    hostileCase
	want hostileWant
	job  string // empty: not submitted
	end  api.Job
	skip string // why the case did not run
	fail string // why it failed, in short, for the summary
}

// matchAll says what of want (substrings, "a|b" for either) and re s
// lacks; "" when it has them all.
func matchAll(s string, want []string, re string) string {
	var miss []string
	for _, w := range want {
		if !slices.ContainsFunc(strings.Split(w, "|"), func(alt string) bool { return strings.Contains(s, alt) }) {
			miss = append(miss, fmt.Sprintf("no %q", w))
		}
	}
	if re != "" && !regexp.MustCompile(re).MatchString(s) {
		miss = append(miss, fmt.Sprintf("no match of %s", re))
	}
	return strings.Join(miss, ", ")
}

// capArgs are the hostileCaps the daemon has flags for, and the flags it
// lacks.
func capArgs(t *testing.T) (args, missing []string) {
	t.Helper()
	help, err := exec.Command(bin.E31d, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("e31d --help: %v\n%s", err, help)
	}
	for _, c := range hostileCaps {
		if regexp.MustCompile(regexp.QuoteMeta(c[0]) + `\b`).Match(help) {
			args = append(args, c[0], c[1])
		} else {
			missing = append(missing, c[0])
		}
	}
	return args, missing
}

// TestHostile puts a hostile submitter on a network of honest providers:
// node 0 runs the byzantine e31d with --misbehave raw-content and no GPUs,
// nodes 1 and 2 are honest providers with 4 simulated GPUs each and low
// caps on entries, depth and layer size. Every case is submitted at once:
// images whose layers attack the unpacker, images only a modified daemon
// can send (after an honest submitter is seen to refuse them), inputs and
// checkpoints that attack the provider as raw DAGs, and honest jobs whose
// output attacks their submitter. Each must end as its case says, through
// release, with a reason that names what was at fault and why; then every
// daemon must still be alive and answer, and honest jobs, with and
// without an image, complete on the same providers.
func TestHostile(t *testing.T) {
	requireSandbox(t)
	byz := byzantineBin(t)
	caps, missing := capArgs(t)
	if len(missing) > 0 {
		t.Logf("e31d has no %s yet: the cases over those caps are expected to fail", strings.Join(missing, ", "))
	}
	args := append([]string{"--epoch", "250ms", "--grace", "1s", "--receipt-interval", "1s", "--stall-timeout", "10s"}, caps...)
	c := start(t, cluster.Options{
		N:             3,
		SimGPUsByNode: []string{"", "4xH100:80GiB", "4xH100:80GiB"},
		Heartbeat:     500 * time.Millisecond,
		Args:          args,
		Misbehave:     []string{"raw-content"},
		Bin:           byz,
	})
	h := &hostileNet{c: c, sub: c.Client(0), honest: c.Client(1), dir: t.TempDir()}
	_, err := exec.LookPath("busybox")
	imagesRun := err == nil
	for _, n := range c.Nodes[1:] {
		logs, err := os.ReadFile(filepath.Join(n.Data, "e31d.log"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(logs), "image jobs run here") {
			imagesRun = false
		}
	}
	if !imagesRun {
		msg := "the image cases need busybox (apt-get install -y busybox-static) and providers that run image jobs on this host (see their logs: user namespaces, overlay, /etc/subuid)"
		if os.Getenv("E31_REQUIRE_RUNC") == "1" {
			t.Fatal(msg)
		}
		t.Log(msg + ": the image cases are skipped")
	}

	cases := slices.Concat(imageCases(), acceptedImageCases(), inputCases(), outputCases(), checkpointCases())
	runs := make([]*hostileRun, len(cases))
	began := time.Now()
	for i, hc := range cases {
		r := &hostileRun{c: hc, want: hc.want}
		runs[i] = r
		if hc.image && !imagesRun {
			r.skip = "no image jobs here"
			continue
		}
		t.Run("submit/"+hc.name, func(t *testing.T) {
			r.job = submit(t, h.sub, hc.build(t, h, &r.want)).ID
		})
		if r.job == "" {
			r.fail = "not submitted"
		}
	}
	t.Logf("%d cases submitted in %s", len(runs), time.Since(began).Round(time.Millisecond))

	deadline := time.Now().Add(2 * time.Minute)
	for _, r := range runs {
		if r.job == "" {
			continue
		}
		t.Run("end/"+r.c.name, func(t *testing.T) {
			r.end = waitJob(t, h.sub, r.job, time.Until(deadline), "release", func(j api.Job) bool { return j.State.Terminal() })
			r.fail = checkEnd(t, r.want, r.end)
			if r.end.Outcome == r.want.outcome && r.c.after != nil {
				r.c.after(t, h, r.end)
				if t.Failed() && r.fail == "" {
					r.fail = "after"
				}
			}
		})
		if r.end.ID == "" {
			r.fail = "did not end"
		}
	}
	logSummary(t, runs, time.Since(began))

	// Every daemon is still there and answers.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i, n := range c.Nodes {
		if !n.Alive() {
			t.Fatalf("%s died", n.Name)
		}
		if _, err := c.Client(i).ID(ctx); err != nil {
			t.Fatalf("%s does not answer its API: %v", n.Name, err)
		}
	}
	// And honest work still completes on the same providers.
	honest := []market.Declaration{decl("honest-after", "echo fine > /out/result", 1, time.Minute)}
	if imagesRun {
		d := decl("honest-image-after", "test -x /bin/busybox && echo fine > /out/result", 1, time.Minute)
		d.Work.Image = ociImage{layers: []ociLayer{h.busybox(t)}}.write(t, filepath.Join(h.dir, "images", "honest"))
		honest = append(honest, d)
	}
	for _, d := range honest {
		j := submit(t, h.sub, d)
		j = waitJob(t, h.sub, j.ID, 60*time.Second, "release", released)
		if j.Outcome != string(ledger.OutcomeCompleted) {
			t.Errorf("honest job %s after the attacks ended %s/%s: %s", d.Name, j.Outcome, j.Attribution, j.Reason)
		}
	}
}

// checkEnd checks a case's job against what it wants, and says in short
// what was wrong ("" when nothing).
func checkEnd(t *testing.T, w hostileWant, j api.Job) string {
	t.Helper()
	var bad []string
	if j.State != api.JobReleased {
		bad = append(bad, "state "+string(j.State))
		t.Errorf("state %s, want released", j.State)
	}
	if j.Outcome != w.outcome || j.Attribution != w.attribution {
		bad = append(bad, "outcome")
		t.Errorf("ended %s/%s, want %s/%s; reason %q", j.Outcome, j.Attribution, w.outcome, w.attribution, j.Reason)
	}
	if msg := matchAll(j.Reason, w.reason, w.reasonRE); msg != "" {
		bad = append(bad, "reason")
		t.Errorf("reason %q: %s", j.Reason, msg)
	}
	for _, s := range w.skipped {
		if !slices.ContainsFunc(j.Skipped, func(e string) bool { return strings.Contains(e, s) }) {
			bad = append(bad, "skipped")
			t.Errorf("skipped %q names nothing with %q", j.Skipped, s)
		}
	}
	return strings.Join(bad, ", ")
}

// logSummary logs every case: how it ended and whether as wanted.
func logSummary(t *testing.T, runs []*hostileRun, took time.Duration) {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "case\tresult\toutcome\tattribution\treason")
	ok := 0
	for _, r := range runs {
		result := "ok"
		switch {
		case r.skip != "":
			result = "skipped: " + r.skip
		case r.fail != "":
			result = "FAIL: " + r.fail
		default:
			ok++
		}
		reason := r.end.Reason
		if len(r.end.Skipped) > 0 {
			reason += fmt.Sprintf(" (left out: %q)", r.end.Skipped)
		}
		if r.want.note != "" {
			reason += " [" + r.want.note + "]"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%q\n", r.c.name, result, r.end.Outcome, r.end.Attribution, reason)
	}
	_ = tw.Flush()
	t.Logf("hostile cases, %d of %d as wanted, %s:\n%s", ok, len(runs), took.Round(time.Second), b.String())
}
