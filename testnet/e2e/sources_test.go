package e2e

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/testnet/cluster"
)

// TestInputsFromAnotherProvider: a second job reading the same input as a
// running one, leased to the other provider, finds it with the provider
// that holds it, and the submitter, whose uplink is only the fallback,
// sends it once in all.
func TestInputsFromAnotherProvider(t *testing.T) {
	c := start(t, cluster.Options{
		N:             3,
		SimGPUsByNode: []string{"", "1xH100:80GiB", "1xH100:80GiB"},
		Metrics:       true,
		Args:          []string{"--epoch", "250ms", "--grace", "1s"},
	})
	sub := c.Client(0)
	in, data := randomInput(t, "data.bin", 6<<20)

	// The first job holds its provider's only GPU while the second runs.
	first := decl("holder", "test -s /data/data.bin && sleep 90", 1, 2*time.Minute)
	first.Data = []market.Input{{Source: in, Mount: "/data"}}
	j1 := submit(t, sub, first)
	j1 = waitJob(t, sub, j1.ID, 60*time.Second, "running", func(j api.Job) bool { return j.State == api.JobRunning })
	if len(j1.Inputs) != 1 {
		t.Fatalf("job inputs %v", j1.Inputs)
	}

	second := decl("reader", "test \"$(wc -c < /data/data.bin)\" -eq 6291456", 1, time.Minute)
	second.Data = []market.Input{{Source: j1.Inputs[0], Mount: "/data"}}
	j2 := submit(t, sub, second)
	j2 = waitJob(t, sub, j2.ID, 60*time.Second, "release", released)
	if j2.Outcome != "completed" || j2.Provider == j1.Provider {
		t.Fatalf("second job %s/%s on %s (first on %s): %s", j2.State, j2.Outcome, j2.Provider, j1.Provider, j2.Reason)
	}

	// One of the two providers fetched the data from the other: the
	// reader's from the holder's, or, where the holder's job was first
	// assigned to the reader's provider, which began staging it before the
	// lease went elsewhere, the holder's from it (node/submitter/stage.go).
	// Either way the submitter's uplink carried it once.
	var fromProviders float64
	for _, n := range c.Nodes[1:] {
		fromProviders += scrape(t, n.Metrics)[`e31_content_fetched_bytes_total{from="provider"}`]
	}
	if fromProviders < float64(len(data)) {
		t.Errorf("the providers fetched %v bytes from each other; want the %d of the data, fetched from the provider that held it", fromProviders, len(data))
	}
	sent := scrape(t, c.Nodes[0].Metrics)[`e31_content_served_bytes_total{to="provider"}`]
	if sent < float64(len(data)) || sent > 1.1*float64(len(data)) {
		t.Errorf("the submitter sent %v bytes for two jobs on two providers; want the data (%d bytes) once", sent, len(data))
	}
}

// TestStagingBeforeTheLease: a job waiting for the only GPU, which Match
// reserves for it, has its input fetched by the provider before the lease,
// so that its lease's staging moves nothing.
func TestStagingBeforeTheLease(t *testing.T) {
	sub, prov, in, data := oneProviderAndAnInput(t)

	busy := submit(t, sub, decl("busy", "sleep 90", 1, 2*time.Minute))
	waitJob(t, sub, busy.ID, 60*time.Second, "running", func(j api.Job) bool { return j.State == api.JobRunning })
	waiting := decl("waiting", "test \"$(wc -c < /data/data.bin)\" -eq 6291456", 1, time.Minute)
	waiting.Data = []market.Input{{Source: in, Mount: "/data"}}
	w := submit(t, sub, waiting)

	// The provider fetches the input while the job still waits.
	deadline := time.Now().Add(60 * time.Second)
	for scrape(t, prov.Metrics)["e31_bytes_prestaged_total"] < float64(len(data)) {
		if time.Now().After(deadline) {
			t.Fatalf("the reserved provider fetched %v bytes before the lease; want %d", scrape(t, prov.Metrics)["e31_bytes_prestaged_total"], len(data))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if j, err := sub.Job(context.Background(), w.ID); err != nil || j.State != api.JobQueued {
		t.Fatalf("waiting job %+v, %v: want it still queued", j, err)
	}

	if _, err := sub.Withdraw(context.Background(), busy.ID); err != nil {
		t.Fatal(err)
	}
	j := waitJob(t, sub, w.ID, 60*time.Second, "release", released)
	if j.Outcome != "completed" {
		t.Fatalf("waiting job ended %s/%s: %s", j.State, j.Outcome, j.Reason)
	}
	if staged := scrape(t, prov.Metrics)["e31_bytes_staged_total"]; staged != 0 {
		t.Errorf("the lease's staging fetched %v bytes; want none, all fetched before", staged)
	}
}

// TestStagingBeforeProposing: a job given to an idle provider that lacks
// its input has it fetched before the lease is proposed, off the meter: the
// lease's staging moves nothing, and the job still runs at once.
func TestStagingBeforeProposing(t *testing.T) {
	sub, prov, in, data := oneProviderAndAnInput(t)
	d := decl("free", "test \"$(wc -c < /data/data.bin)\" -eq 6291456", 1, time.Minute)
	d.Data = []market.Input{{Source: in, Mount: "/data"}}
	j := waitJob(t, sub, submit(t, sub, d).ID, 60*time.Second, "release", released)
	if j.Outcome != "completed" {
		t.Fatalf("job ended %s/%s: %s", j.State, j.Outcome, j.Reason)
	}
	m := scrape(t, prov.Metrics)
	if m["e31_bytes_prestaged_total"] != float64(len(data)) || m["e31_bytes_staged_total"] != 0 {
		t.Errorf("fetched %v bytes before the lease and %v under it; want all %d before", m["e31_bytes_prestaged_total"], m["e31_bytes_staged_total"], len(data))
	}
}

// oneProviderAndAnInput starts a submitter and a provider of one GPU, with
// metrics, and writes an input folder holding data.bin, 6 MiB of random
// bytes.
func oneProviderAndAnInput(t *testing.T) (sub *api.Client, prov *cluster.Node, in string, data []byte) {
	t.Helper()
	c := start(t, cluster.Options{
		N:             2,
		SimGPUsByNode: []string{"", "1xH100:80GiB"},
		Metrics:       true,
		Args:          []string{"--epoch", "250ms", "--grace", "1s"},
	})
	in, data = randomInput(t, "data.bin", 6<<20)
	return c.Client(0), c.Nodes[1], in, data
}

// TestOwnJobOnOwnGPUs: a node that submits a job with an input and is
// itself the provider Match picks (here the only one) stages the input from
// its own store and runs the job. The input was once fetched from "the
// submitter", which, being this node, was no source at all.
func TestOwnJobOnOwnGPUs(t *testing.T) {
	c := start(t, cluster.Options{N: 1, SimGPUs: "1xH100:80GiB", Args: []string{"--epoch", "250ms"}})
	cl := c.Client(0)
	in, _ := randomInput(t, "data.bin", 3<<20)
	d := decl("own", "test \"$(wc -c < /data/data.bin)\" -eq 3145728", 1, time.Minute)
	d.Data = []market.Input{{Source: in, Mount: "/data"}}
	j := submit(t, cl, d)
	j = waitJob(t, cl, j.ID, 60*time.Second, "release", released)
	if j.Outcome != string(ledger.OutcomeCompleted) || j.Provider != c.Nodes[0].PeerID {
		t.Fatalf("own job ended %s/%s on %s: %s", j.Outcome, j.Attribution, j.Provider, j.Reason)
	}
}

// TestReservationMovesToTheSubmitter: on two nodes that both submit and
// provide, a job's input is imported on its submitter, whose offer shows
// it holds the data only at its next publication. Until then Match may
// reserve the other node, which starts staging; then the reservation moves
// to the submitter, for its data. The submitter's own provider was told to
// wait for the other to finish staging, and, as nothing marked that
// finished (only a run made a holder), waited the whole ten minutes
// before proposing. The job must be released well within that.
func TestReservationMovesToTheSubmitter(t *testing.T) {
	c := start(t, cluster.Options{N: 2, SimGPUs: "1xH100:80GiB"})
	in := t.TempDir()
	for i := range 2000 {
		b := make([]byte, 10000)
		if _, err := rand.Read(b); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(in, fmt.Sprintf("frame-%04d.jpg", i)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cl := c.Client(0)
	d := decl("moves", "test \"$(ls /data | wc -l)\" -eq 2000", 1, time.Minute)
	d.Data = []market.Input{{Source: in, Mount: "/data"}}
	j := submit(t, cl, d)
	j = waitJob(t, cl, j.ID, 60*time.Second, "release", released)
	if j.Outcome != string(ledger.OutcomeCompleted) {
		t.Fatalf("ended %s/%s on %s: %s", j.Outcome, j.Attribution, j.Provider, j.Reason)
	}
}
