package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/ledger/ledgertest"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/apiserver"
	"github.com/e31network/e31/node/submitter"
	"github.com/libp2p/go-libp2p/core/peer"
)

// TestMain runs the real main when asked, so that a test can check exit
// codes of the command as a user runs it.
func TestMain(m *testing.M) {
	if os.Getenv("E31_TEST_RUN_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// e31 runs the command in-process with args and returns stdout, stderr and
// its error.
func e31(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	g := &globalOptions{stdout: &out, stderr: &errOut}
	root := newRootCommand(g)
	root.SetArgs(args)
	root.SetOut(&out)
	root.SetErr(&errOut)
	err := root.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

// e31Exit runs this test binary as the e31 command and returns its output
// and exit code.
func e31Exit(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "E31_TEST_RUN_MAIN=1")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(out), ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(out), 0
}

// realLedger opens a ledger in a temp dir with one lease of every kind of
// record, as its provider keeps it.
func realLedger(t *testing.T) (*ledger.Ledger, ledgertest.Mixed) {
	t.Helper()
	l, err := ledger.Open(context.Background(), filepath.Join(t.TempDir(), "ledger"), ledger.Options{Self: ledgertest.NewParty(t, 1).ID})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l, ledgertest.Fill(t, l)
}

// daemonAPI serves a real ledger through the daemon's API handler on
// loopback, and returns its address for --api.
func daemonAPI(t *testing.T, l *ledger.Ledger) string {
	t.Helper()
	srv := httptest.NewServer(apiserver.Handler(apiserver.Config{Jobs: fullIDs{}, Ledger: l, Log: slog.New(slog.DiscardHandler)}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

type (
	submitterJobs = apiserver.Jobs
	// fullIDs is a submitter that knows job IDs only in full.
	fullIDs struct{ submitterJobs }
)

func (fullIDs) FullID(id string) string { return id }

// LedgerJobs knows no job of this node: the ledger routes count a job by
// its ID, and an array's by its tasks'.
func (fullIDs) LedgerJobs(id string) (api.JobIDs, error) {
	return api.JobIDs{}, fmt.Errorf("job %s: %w", id, submitter.ErrNotFound)
}

const wantSummary = "11 entries: 8 two-sided, 1 one-sided, 1 superseded, 1 disputes; every signature verifies"

// verify checks an export file from a real ledger with no daemon at all
// (--api points nowhere), and a tampered copy exits non-zero naming the
// entry.
func TestVerifyWithoutDaemon(t *testing.T) {
	l, m := realLedger(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "receipts.json")
	var buf bytes.Buffer
	if _, err := l.Export(context.Background(), &buf, ledger.ExportFilter{}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	nowhere := filepath.Join(dir, "no-daemon.sock")

	out, code := e31Exit(t, "--api", nowhere, "verify", file)
	if code != 0 || !strings.Contains(out, wantSummary) {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	stdout, _, err := e31(t, "--api", nowhere, "verify", "--json", file)
	if err != nil {
		t.Fatal(err)
	}
	var res verifyResult
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatal(err)
	}
	if !res.OK || res.Entries != m.Entries || res.OneSided != 1 || res.Superseded != 1 || res.Disputes != 1 || res.TwoSided != 8 {
		t.Fatalf("--json: %+v", res)
	}
	// The totals verify prints are the ledger's own sum of the same
	// leases.
	rep, err := l.Usage(context.Background(), ledger.UsageFilter{}, ledger.DefaultPolicy())
	if err != nil {
		t.Fatal(err)
	}
	if res.Held.Leases != rep.Total.Leases || math.Abs(res.Held.GPUHours-rep.Total.GPUHours) > 1e-9 ||
		math.Abs(res.Held.OwedGPUHours-rep.Total.OwedGPUHours) > 1e-9 || res.Held.Leases == 0 {
		t.Fatalf("verify's held %+v, usage's %+v", res.Held, rep.Total)
	}
	if want := heldOwed(rep.Total.GPUHours, rep.Total.OwedGPUHours); !strings.Contains(out, want) {
		t.Fatalf("verify does not print %q:\n%s", want, out)
	}

	// A file with no entries proves nothing: said so, and non-zero.
	empty := filepath.Join(dir, "empty.json")
	var none bytes.Buffer
	if _, err := l.Export(context.Background(), &none, ledger.ExportFilter{Job: "no-such-job"}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(empty, none.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, code := e31Exit(t, "--api", nowhere, "verify", empty); code == 0 || !strings.Contains(out, "NOTHING TO VERIFY") {
		t.Fatalf("empty export: exit %d:\n%s", code, out)
	}
	if stdout, _, err := e31(t, "verify", "--json", empty); !errors.Is(err, errEmptyExport) || !strings.Contains(stdout, `"ok": false`) {
		t.Fatalf("empty export --json: %v\n%s", err, stdout)
	}

	// One more hour held on the lost lease's one-sided record (the export
	// writes an entry a line): the provider's signature no longer covers it.
	lines := bytes.Split(buf.Bytes(), []byte("\n"))
	edited := 0
	for i, line := range lines {
		if bytes.Contains(line, []byte(`"lease":"lost"`)) && bytes.Contains(line, []byte(`"signer":"provider"`)) {
			lines[i] = bytes.Replace(line, []byte(`"held_until":"2026-11-29T14:04`), []byte(`"held_until":"2026-11-29T15:04`), 1)
			if !bytes.Equal(lines[i], line) {
				edited++
			}
		}
	}
	if edited != 1 {
		t.Fatalf("edited %d records, want the one", edited)
	}
	tampered := filepath.Join(dir, "tampered.json")
	if err := os.WriteFile(tampered, bytes.Join(lines, []byte("\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code = e31Exit(t, "--api", nowhere, "verify", tampered)
	if code == 0 || !strings.Contains(out, "FIRST BAD") || !strings.Contains(out, "lease lost") {
		t.Fatalf("tampered file: exit %d:\n%s", code, out)
	}
	stdout, _, err = e31(t, "verify", "--json", tampered)
	if !errors.Is(err, errBadExport) {
		t.Fatalf("tampered --json: %v", err)
	}
	res = verifyResult{}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || res.OK || res.Problem == "" {
		t.Fatalf("tampered --json: %+v, %v", res, err)
	}

	if out, code := e31Exit(t, "verify", filepath.Join(dir, "absent.json")); code == 0 {
		t.Fatalf("a missing file verifies:\n%s", out)
	}
}

func TestUsageText(t *testing.T) {
	l, m := realLedger(t)
	addr := daemonAPI(t, l)

	stdout, _, err := e31(t, "--api", addr, "usage")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		m.Submitter.ID.String() + "  submitter   0.300      0.167  0.133*",
		m.Submitter2.ID.String() + "  submitter   0.067      0.067  0.067*",
		"H100",
		"provider-lost  provider     one-sided*  1       0.133      no",
		"disputed*",
		"policy: default\n",
		"queued time: never owed",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("usage output lacks %q:\n%s", want, stdout)
		}
	}

	stdout, _, err = e31(t, "--api", addr, "usage", "--json", "--peer", m.Submitter2.ID.String(), "--since", "2026-11-29T14:01:00Z")
	if err != nil {
		t.Fatal(err)
	}
	var rep ledger.UsageReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.ByPeer) != 1 || rep.ByPeer[0].Peer != m.Submitter2.ID || rep.ByPeer[0].GPUHours*60 < 1.99 || rep.ByPeer[0].GPUHours*60 > 2.01 {
		t.Fatalf("usage --json --peer --since: %+v", rep.ByPeer)
	}

	if _, _, err := e31(t, "--api", addr, "usage", "--since", "last week"); err == nil {
		t.Fatal("--since 'last week' accepted")
	}
}

// This node's own jobs on its own GPUs show under its own ID, marked, and
// owed by no one.
func TestUsageMarksOwnJobs(t *testing.T) {
	self := peer.ID("self-node")
	rep := ledger.UsageReport{
		Policy: ledger.DefaultPolicy(),
		Rows: []ledger.UsageRow{{Peer: self, Role: ledger.RoleSelf, GPUModel: "H100", Outcome: ledger.OutcomeCompleted,
			Attribution: ledger.AttributionJob, Basis: ledger.SettlementTwoSided, Leases: 2, GPUHours: 1.5}},
		ByPeer:  []ledger.UsageTotal{{Peer: self, Role: ledger.RoleSelf, GPUHours: 1.5, CPUHours: 12, MemoryGiBHours: 48, DiskGiBHours: 15}},
		ByModel: []ledger.UsageTotal{{GPUModel: "H100", GPUHours: 1.5}},
	}
	var b strings.Builder
	if err := printUsage(&b, rep); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{self.String() + "  own jobs    1.500      0.000  -          12.000     0.000  48.000        15.000", "no (own jobs)",
		"own jobs: this node's own jobs on its own GPUs"} {
		if !strings.Contains(out, want) {
			t.Errorf("usage output lacks %q:\n%s", want, out)
		}
	}
}

func TestReceiptsExportAndList(t *testing.T) {
	l, m := realLedger(t)
	addr := daemonAPI(t, l)
	file := filepath.Join(t.TempDir(), "out.json")

	_, stderr, err := e31(t, "--api", addr, "receipts", "export", "-o", file)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr, wantSummary) {
		t.Fatalf("export summary: %s", stderr)
	}
	if out, code := e31Exit(t, "verify", file); code != 0 {
		t.Fatalf("verify the exported file: exit %d\n%s", code, out)
	}
	stdout, _, err := e31(t, "--api", addr, "receipts", "export", "--job", m.Completed.Job)
	if err != nil {
		t.Fatal(err)
	}
	if rep, err := ledger.VerifyExport(strings.NewReader(stdout)); err != nil || rep.Entries != 3 {
		t.Fatalf("export of one job to stdout: %+v, %v", rep, err)
	}

	stdout, stderr, err = e31(t, "--api", addr, "receipts", "--verify")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"provider only, superseded", "provider only\n", "disputes", "theirs", "submitter"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("receipts lacks %q:\n%s", want, stdout)
		}
	}
	if !strings.Contains(stderr, "1 one-sided records and 1 disputed leases") {
		t.Errorf("verify summary: %s", stderr)
	}

	stdout, _, err = e31(t, "--api", addr, "receipts", "--json")
	if err != nil {
		t.Fatal(err)
	}
	// An array of receipts (DESIGN.md), each with its own fields and the
	// marks: a superseded one-sided record, both versions of a dispute.
	var rows []struct {
		ledger.Receipt
		Superseded bool         `json:"superseded"`
		Dispute    *disputeMark `json:"dispute"`
	}
	if err := json.Unmarshal([]byte(stdout), &rows); err != nil {
		t.Fatalf("receipts --json is not an array of receipts: %v\n%s", err, stdout)
	}
	var plain, superseded int
	var versions []string
	for _, r := range rows {
		switch {
		case r.Dispute != nil:
			versions = append(versions, r.Dispute.Version+" "+string(r.Signer))
		case r.Superseded:
			superseded++
		default:
			plain++
		}
		if r.Lease == "" || r.Job == "" || r.Provider == "" || r.Submitter == "" {
			t.Errorf("a row without the receipt's own fields: %+v", r)
		}
	}
	if plain+superseded != m.Entries-1 || superseded != 1 || !slices.Equal(versions, []string{"ours " + string(ledger.SignerProvider), "theirs " + string(ledger.SignerSubmitter)}) {
		t.Fatalf("receipts --json: %d receipts, %d superseded, dispute versions %q", plain+superseded, superseded, versions)
	}
	var generic []map[string]any
	if err := json.Unmarshal([]byte(stdout), &generic); err != nil || generic[0]["lease"] == nil || generic[0]["phases"] == nil {
		t.Fatalf("receipts --json as plain objects: %v, %v", generic, err)
	}

	// No daemon: exit 3, and no file left behind.
	dir := t.TempDir()
	out, code := e31Exit(t, "--api", filepath.Join(dir, "none.sock"), "receipts", "export", "-o", filepath.Join(dir, "x.json"))
	if code != 3 || !strings.Contains(out, api.ErrNoDaemon.Error()) {
		t.Fatalf("export with no daemon: exit %d\n%s", code, out)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("export with no daemon left %v", entries)
	}
}
