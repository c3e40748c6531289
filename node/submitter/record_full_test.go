package submitter

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/wire"
)

var updateRecordFull = flag.Bool("update-record-full", false, "rewrite testdata/record_full.json")

// fullRecord is a record with every field set, each part of it included.
func fullRecord() Record {
	at := time.UnixMilli(1_800_000_000_000).UTC()
	code := 3
	var r Record
	r.ID = "job1"
	r.Envelope = []byte("envelope")
	r.Declaration = market.Declaration{Name: "train"}
	r.Labels = map[string]string{"team": "a"}
	r.Sources = []string{"/data/in"}
	r.ResumeOf = "job0"
	r.Root = "root0"
	r.Next = "job2"
	r.ResumeFailed = "no room"
	r.State = api.JobReleased
	r.Outcome = ledger.OutcomeFailed
	r.Attribution = ledger.AttributionJob
	r.Reason = "exit 3"
	r.ExitCode = &code
	r.Lease = &wire.SignedLease{Terms: wire.LeaseTerms{ID: "lease1", Job: "job1", Provider: "prov", Submitter: "sub", GPUs: []string{"g0"}}}
	r.Steps = []api.Step{{Step: api.StepSubmit, At: at}, {Step: api.StepRelease, At: at.Add(time.Minute)}}
	r.Output = "out-cid"
	r.Skipped = []string{"big: over the limit"}
	r.ProviderKeeps = at.Add(time.Hour)
	r.Checkpoint = "ck-cid"
	r.CheckpointN = 4
	r.CheckpointLease = "lease1"
	r.CheckpointAt = at.Add(30 * time.Second)
	r.Submitted = at
	r.Wait = "waiting"
	r.LastReceipt = at.Add(40 * time.Second)
	r.Withdrawn = true
	r.Resumes = 1
	r.Preemptions = 2
	r.Retries = 3
	r.Hold = &Hold{After: []string{"up1"}, AfterAny: []string{"up2"}, Released: true}
	r.Resumed = true
	r.GPUsSeen = []ledger.GPUSeen{{UUID: "GPU-1", Model: "H100"}}
	r.Relay = "relay1"
	r.GPUMismatch = "model differs"
	r.Avoid = []string{"bad"}
	r.AvoidUntil = map[string]time.Time{"bad": at.Add(2 * time.Hour)}
	r.Avoided = map[string]int{"bad": 2}
	r.RetryNext = true
	r.PreemptNext = true
	r.GangOver = true
	r.GangLease = &wire.SignedGangLease{Terms: wire.GangLease{Gang: "g", Submitter: "sub", Parts: []wire.GangPart{{Rank: 0, Provider: "prov", Lease: "lease1"}}}, ProviderSigs: [][]byte{[]byte("sig")}}
	r.Tasks = 2
	r.Array = "arr"
	r.Index = 1
	r.Confirmed = true
	return r
}

// TestRecordJSONStable checks that a record with every field set is
// written byte for byte as the records already in the stores were, and
// reads back as it was.
func TestRecordJSONStable(t *testing.T) {
	golden := filepath.Join("testdata", "record_full.json")
	r := fullRecord()
	got, err := json.MarshalIndent(r, "", "\t")
	if err != nil {
		t.Fatal(err)
	}
	if *updateRecordFull {
		if err := os.WriteFile(golden, append(got, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(append(got, '\n'), want) {
		t.Fatalf("record JSON changed:\n got %s\nwant %s", got, want)
	}
	var back Record
	if err := json.Unmarshal(want, &back); err != nil {
		t.Fatal(err)
	}
	again, err := json.MarshalIndent(back, "", "\t")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, got) {
		t.Fatalf("record does not read back as written:\n got %s\nwant %s", again, got)
	}
}
