package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/ledger/ledgertest"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/p2p/peertext"
)

// osc52 writes "pwned" to the clipboard of the terminal that prints it.
const osc52 = "\x1b]52;c;cHduZWQ=\a"

// hostile is text a peer can get printed: an OSC 52 sequence, a screen
// clear, a C1 CSI, a bidi override, and a tab and a newline that would
// break a table's columns and forge a line.
const hostile = "H100" + osc52 + "\x1b[2J\u009b31m\u202e\t\n.exe"

// terminalObeys reports whether out holds anything a terminal would obey
// rather than show, beyond the newlines a command writes itself (tabwriter
// turns the tabs of its layout into spaces).
func terminalObeys(out string) bool {
	return strings.ContainsFunc(out, func(r rune) bool { return r != '\n' && peertext.Unsafe(r) })
}

// daemonSaying serves the routes the commands read, each answering v as
// JSON, as a daemon holding what peers said would.
func daemonSaying(t *testing.T, routes map[string]any) http.Handler {
	t.Helper()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, ok := routes[r.URL.Path]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(api.Error{Error: "no route " + r.URL.Path})
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	})
}

// hostileReceipts is a ledger's answer holding a final receipt whose
// reason writes the clipboard and whose GPU model and GPUs seen reorder
// their line, as a ledger stored before the rule on peers' text may
// hold; both parties signed it.
func hostileReceipts(t *testing.T) api.Receipts {
	l := ledgertest.Lease{ID: "lease-1", Job: "job-1", Provider: ledgertest.NewParty(t, 1), Submitter: ledgertest.NewParty(t, 2),
		GPUs: 1, GPUModel: "NVIDIA \u202eH100", From: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)}
	chain := l.Chain(t, 2, &ledger.Cause{Outcome: ledger.OutcomeFailed, Attribution: ledger.AttributionJob})
	r := &chain[1]
	r.Reason = "exit status 1: /out/x" + osc52
	r.GPUsSeen = []ledger.GPUSeen{{UUID: "GPU-\u202ea", Model: "A10\u2066"}}
	r.ProviderSig, r.SubmitterSig = nil, nil
	if err := r.SignProvider(l.Provider.Key); err != nil {
		t.Fatal(err)
	}
	if err := r.Countersign(l.Submitter.Key); err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(chain)
	if err != nil {
		t.Fatal(err)
	}
	return api.Receipts{Receipts: raw}
}

// A GPU model in an offer, a job's name, labels and reason, a receipt's
// GPU model and the GPUs it saw: what peers wrote prints escaped in
// e31 nodes, status, list and receipts, so an OSC 52 sequence shows as
// \x1b]52;…\a instead of writing the reader's clipboard. --json stays
// JSON that reads back as the daemon said it, with nothing a terminal
// obeys in it either.
func TestPeerTextPrintsEscaped(t *testing.T) {
	job := api.Job{ID: "job1", Name: "train" + osc52, Labels: map[string]string{"team": "vision" + osc52},
		State: api.JobReleased, Outcome: "failed", Attribution: "job", Provider: "12D3KooWprov",
		Reason: "exit status 1\n/out/" + osc52, Submitted: time.Now(),
		GPUsSeen: []api.GPUSeen{{UUID: "GPU-a", Model: "A10" + osc52}}, Skipped: []string{"/out/\x1b[2Jlink: points out of the output"}}
	nodes := []api.Node{{PeerID: "12D3KooWprov", LastSeen: time.Now(),
		GPUs: []api.GPU{{UUID: "GPU-a", Model: "NVIDIA H100" + osc52, MemoryBytes: 80 << 30, Free: true}}}}
	daemon := daemonSaying(t, map[string]any{
		"/v1/nodes": nodes, "/v1/jobs/job1": job, "/v1/jobs": []api.Job{job}, "/v1/receipts": hostileReceipts(t),
	})

	for _, c := range []struct {
		args []string
		want []string // as printed, escaped
	}{
		{[]string{"nodes"}, []string{`1xNVIDIA H100\x1b]52;c;cHduZWQ=\a 80GiB`}},
		{[]string{"status", "job1"}, []string{
			`job1 (train\x1b]52;c;cHduZWQ=\a)`, `team=vision\x1b]52;c;cHduZWQ=\a`,
			`exit status 1\n/out/\x1b]52;c;cHduZWQ=\a`, `GPU-a (A10\x1b]52;c;cHduZWQ=\a)`, `/out/\x1b[2Jlink`}},
		{[]string{"list"}, []string{`train\x1b]52;c;cHduZWQ=\a`}},
		{[]string{"receipts"}, []string{`GPU-\u202ea `, ` A10\u2066 `, ` NVIDIA \u202eH100`}},
	} {
		out, err := runCLI(t, daemon, c.args...)
		if err != nil {
			t.Fatalf("e31 %s: %v\n%s", strings.Join(c.args, " "), err, out)
		}
		if terminalObeys(out) {
			t.Errorf("e31 %s printed what a terminal obeys:\n%q", strings.Join(c.args, " "), out)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("e31 %s does not print %s:\n%s", strings.Join(c.args, " "), w, out)
			}
		}
	}

	for _, args := range [][]string{{"nodes", "--json"}, {"status", "job1", "--json"}, {"receipts", "--json"}} {
		out, err := runCLI(t, daemon, args...)
		if err != nil {
			t.Fatalf("e31 %s: %v", strings.Join(args, " "), err)
		}
		if strings.ContainsFunc(out, func(r rune) bool { return r != '\n' && peertext.Unsafe(r) }) {
			t.Errorf("e31 %s printed what a terminal obeys:\n%q", strings.Join(args, " "), out)
		}
		if !strings.Contains(out, `\u001b]52;c;cHduZWQ=\u0007`) {
			t.Errorf("e31 %s lost the sequence, or wrote it some other way:\n%s", strings.Join(args, " "), out)
		}
	}
	out, _ := runCLI(t, daemon, "receipts", "--json")
	var rs []map[string]any
	if err := json.Unmarshal([]byte(out), &rs); err != nil || len(rs) != 2 || rs[1]["reason"] != "exit status 1: /out/x"+osc52 || rs[1]["gpu_model"] != "NVIDIA \u202eH100" {
		t.Fatalf("receipts --json does not read back as stored (%v):\n%s", err, out)
	}
}

// Whatever string of a job, an offer, a peer or a usage report the daemon
// sends, its text form escapes it: each is filled with hostile text, and
// the output holds nothing a terminal obeys and no line more than the
// same fields filled with plain text give. A field added later is covered
// without being named here.
func TestEveryStringPrintsEscaped(t *testing.T) {
	for _, c := range []struct {
		name  string
		print func(t *testing.T, g *globalOptions, s string)
	}{
		{"status", func(_ *testing.T, g *globalOptions, s string) {
			var j api.Job
			fill(reflect.ValueOf(&j).Elem(), s)
			j.Steps = append(j.Steps, api.Step{Step: api.StepRun, At: time.Now()}) // a run time line, with its GPUs
			printJob(g, j)
		}},
		{"usage", func(t *testing.T, g *globalOptions, s string) {
			var rep ledger.UsageReport
			fill(reflect.ValueOf(&rep).Elem(), s)
			if err := printUsage(g.stdout, rep); err != nil {
				t.Fatal(err)
			}
		}},
		{"nodes, peers, list, wait", func(t *testing.T, g *globalOptions, s string) {
			var (
				n api.Node
				p api.Peer
				j api.Job
			)
			for _, v := range []any{&n, &p, &j} {
				fill(reflect.ValueOf(v).Elem(), s)
			}
			j.State = api.JobReleased
			daemon := daemonSaying(t, map[string]any{"/v1/nodes": []api.Node{n}, "/v1/peers": []api.Peer{p},
				"/v1/jobs": []api.Job{j}, "/v1/jobs/" + j.ID: j})
			for _, args := range [][]string{{"nodes"}, {"peers"}, {"list"}, {"wait", j.ID}} {
				out, _ := runCLI(t, daemon, args...) // wait fails: the job did not complete
				io.WriteString(g.stdout, out)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var plain, bad bytes.Buffer
			c.print(t, &globalOptions{stdout: &plain, stderr: &plain}, "x")
			c.print(t, &globalOptions{stdout: &bad, stderr: &bad}, hostile)
			if terminalObeys(bad.String()) {
				t.Fatalf("printed what a terminal obeys:\n%q", bad.String())
			}
			if p, b := strings.Count(plain.String(), "\n"), strings.Count(bad.String(), "\n"); p != b {
				t.Fatalf("hostile text added lines (%d, not %d):\n%s", b, p, bad.String())
			}
			if !strings.Contains(bad.String(), `\x1b]52;c;cHduZWQ=\a\x1b[2J\u009b31m\u202e\t\n.exe`) {
				t.Fatalf("the hostile text is not shown escaped:\n%s", bad.String())
			}
		})
	}
}

// fill sets every string reachable from v to s, growing each slice and map
// to one element and allocating each pointer, so that every field a
// printer may show holds s.
func fill(v reflect.Value, s string) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		fill(v.Elem(), s)
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Now()))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), s)
			}
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return // raw JSON, bytes: not text
		}
		e := reflect.New(v.Type().Elem()).Elem()
		fill(e, s)
		v.Set(reflect.Append(reflect.MakeSlice(v.Type(), 0, 1), e))
	case reflect.Map:
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k, s)
		fill(e, s)
		m := reflect.MakeMap(v.Type())
		m.SetMapIndex(k, e)
		v.Set(m)
	}
}
