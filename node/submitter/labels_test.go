package submitter

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/state"
	"github.com/e31network/e31/node/wire/wiretest"
)

// A declaration's labels stay on the submitter: on the job's record and in
// its API view, never in the signed declaration it broadcasts; a
// resumption keeps the labels of the job it resumes.
func TestLabelsStayLocal(t *testing.T) {
	h := newHarness(t, Config{ProviderLostAfter: time.Hour, RequeueEvery: time.Hour}, noOffers{})
	ctx := context.Background()
	d := market.NewDeclaration("sweep", []string{"true"}, 1, market.Hour, nil)
	d.Labels = map[string]string{"sweep": "lr", "team": "vision"}
	raw, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	j, err := h.s.Submit(ctx, api.SubmitRequest{Declaration: raw}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if j.Labels["sweep"] != "lr" || j.Labels["team"] != "vision" {
		t.Fatalf("the job's labels: %v", j.Labels)
	}
	var r Record
	if ok, err := h.records.Get(state.PrefixJob, j.ID, &r); !ok || err != nil {
		t.Fatalf("record of %s: %v %v", j.ID, ok, err)
	}
	if strings.Contains(string(r.Envelope), "vision") || r.Declaration.Labels != nil {
		t.Fatalf("the labels were signed into the broadcast declaration:\n%s", r.Envelope)
	}
	if got, err := h.s.Job(j.ID); err != nil || got.Labels["team"] != "vision" {
		t.Fatalf("the job read back: %v, %v", got.Labels, err)
	}

	bad := market.NewDeclaration("bad", []string{"true"}, 1, market.Hour, nil)
	bad.Labels = map[string]string{"-x": "1"}
	raw, _ = json.Marshal(bad)
	if _, err := h.s.Submit(ctx, api.SubmitRequest{Declaration: raw}, nil); err == nil || !strings.Contains(err.Error(), "labels") {
		t.Fatalf("a label whose key starts with '-': %v", err)
	}

	plain := market.NewDeclaration("plain", []string{"true"}, 1, market.Hour, nil)
	h.endedJob(t, "labelled", plain, "")
	if err := h.s.jobs.get("labelled").update(func(r *Record) error { r.Labels = map[string]string{"run": "7"}; return nil }); err != nil {
		t.Fatal(err)
	}
	again, err := h.s.Submit(ctx, api.SubmitRequest{ResumeOf: "labelled", FromStart: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if own := h.job(t, lastAttempt(again)); own.Labels["run"] != "7" || again.Labels["run"] != "7" {
		t.Fatalf("the resumption's labels: %v, want those of the job it resumes", again.Labels)
	}
}

// job:JOB/PATH names an earlier job's output: it becomes that output's
// CID path, and a job without output, or none at all, is refused naming it.
func TestResolveJobSources(t *testing.T) {
	h := newHarness(t, Config{ProviderLostAfter: time.Hour, RequeueEvery: time.Hour}, noOffers{})
	plain := market.NewDeclaration("plain", []string{"true"}, 1, market.Hour, nil)
	h.endedJob(t, "withoutput", plain, "")
	h.endedJob(t, "lostjob", plain, "")
	out := wiretest.CID(t, "an output")
	if err := h.s.jobs.get("withoutput").update(func(r *Record) error { r.Output = out; return nil }); err != nil {
		t.Fatal(err)
	}
	d := market.NewDeclaration("next", []string{"true"}, 1, market.Hour, []market.Input{
		{Source: "job:withoutput/out/model.pt", Mount: "/prev/model.pt"}, {Source: "/data", Mount: "/data"}})
	if err := h.s.in.resolveJobSources(context.Background(), &d); err != nil {
		t.Fatal(err)
	}
	if d.Data[0].Source != out+"/out/model.pt" || d.Data[1].Source != "/data" {
		t.Fatalf("sources %q, want the output's CID path and the path left alone", []string{d.Data[0].Source, d.Data[1].Source})
	}
	for src, want := range map[string]string{
		"job:lostjob/out": "job lostjob has no output (it is released, provider-lost)",
		"job:nosuch/out":  "nosuch",
		"job:withoutput":  "want job:JOB/out",
	} {
		d := market.NewDeclaration("next", []string{"true"}, 1, market.Hour, []market.Input{{Source: src, Mount: "/prev"}})
		if err := h.s.in.resolveJobSources(context.Background(), &d); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "data[0].source") {
			t.Errorf("%s: %v, want an error on data[0].source saying %q", src, err, want)
		}
	}
}
