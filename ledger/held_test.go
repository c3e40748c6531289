package ledger

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// The CPUs, memory and disk a lease held are signed by both sides, survive
// JSON, never encode like a receipt without them (whatever comes before
// them), leave receipts without them as they were, and are refused where
// no declaration could have asked for them.
func TestHeldSignedAndKept(t *testing.T) {
	prov, sub, relay := newParty(t, 1), newParty(t, 2), newParty(t, 3)
	base := final(interim("lease-1", "job-1", prov, sub, 1, hex.EncodeToString(make([]byte, 32))))
	plain := base.SigningBytes()

	r := base
	r.CPUs, r.MemoryBytes, r.DiskBytes = 4, 8<<30, 10<<30
	r = sign(t, r, prov, sub)
	if err := r.Verify(); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(r.SigningBytes(), plain) || len(r.SigningBytes()) == len(plain) {
		t.Fatal("the resources held are not a tail after the old encoding")
	}
	// Pinned: a change would break every signature made with them.
	sum := sha256.Sum256(r.SigningBytes())
	if got, want := hex.EncodeToString(sum[:]), "6b3010644523957a4af424eadf98ae2a6877cd2c224b4695a6545544063ac4be"; got != want {
		t.Errorf("signing bytes with the resources held: sha256 %s, want %s", got, want)
	}
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{`"cpus":4`, `"memory_bytes":8589934592`, `"disk_bytes":10737418240`} {
		if !strings.Contains(string(data), f) {
			t.Errorf("JSON %s lacks %s", data, f)
		}
	}
	back, err := DecodeReceipt(data)
	if err != nil {
		t.Fatal(err)
	}
	if err := back.Verify(); err != nil || back.CPUs != 4 || back.MemoryBytes != 8<<30 || back.DiskBytes != 10<<30 {
		t.Fatalf("round trip: %v, %d CPUs, %d memory, %d disk", err, back.CPUs, back.MemoryBytes, back.DiskBytes)
	}
	if b, _ := json.Marshal(base); strings.Contains(string(b), `"cpus"`) || strings.Contains(string(b), `"disk_bytes"`) {
		t.Fatal("a receipt without the resources held names them")
	}
	if got := r.CPUSeconds(); got != r.Held().Seconds()*4 {
		t.Fatalf("CPUSeconds %v, want %v", got, r.Held().Seconds()*4)
	}

	// Every tail before them, set or not, with and without them: no two
	// encode alike.
	var tails []Receipt
	for _, model := range []string{"", "X"} {
		for _, seen := range [][]GPUSeen{nil, {{UUID: "GPU-1", Model: "X"}}} {
			for _, rel := range []bool{false, true} {
				for _, at := range []bool{false, true} {
					for _, held := range []int{0, 1, 2} {
						c := base
						c.GPUModel, c.GPUsSeen = model, seen
						if rel {
							c.Relay = relay.id
						}
						if at {
							c.CheckpointAt = base.HeldFrom.Add(time.Second)
						}
						switch held {
						case 1:
							c.CPUs = 1
						case 2:
							c.DiskBytes = 16 << 20
						}
						tails = append(tails, c)
					}
				}
			}
		}
	}
	seen := map[string]int{}
	for i, c := range tails {
		k := string(c.SigningBytes())
		if j, ok := seen[k]; ok {
			t.Fatalf("receipts %d and %d differ but encode alike", j, i)
		}
		seen[k] = i
	}

	// A one-sided record signs them too.
	one := oneSided(t, interim("lease-1", "job-1", prov, sub, 0, ""), SignerSubmitter, prov, sub, OutcomeProviderLost, AttributionProvider)
	withHeld := one
	withHeld.CPUs = 2
	if bytes.Equal(one.SigningBytes(), withHeld.SigningBytes()) {
		t.Fatal("a one-sided record's CPUs are not signed")
	}

	for name, bad := range map[string]func(*Receipt){
		"negative cpus": func(r *Receipt) { r.CPUs = -1 },
		"cpus":          func(r *Receipt) { r.CPUs = 1025 },
		"memory":        func(r *Receipt) { r.MemoryBytes = 65<<40 + 1 },
		"disk":          func(r *Receipt) { r.DiskBytes = 65 << 40 },
	} {
		c := r
		bad(&c)
		if err := c.Validate(); !errors.Is(err, ErrInvalidReceipt) {
			t.Errorf("%s: Validate %v, want ErrInvalidReceipt", name, err)
		}
	}
}

// A receipt that names CPUs or memory other than its lease's terms is
// refused against them; one that names none is taken, as before.
func TestHeldCheckedAgainstTerms(t *testing.T) {
	prov, sub := newParty(t, 1), newParty(t, 2)
	r := interim("lease-1", "job-1", prov, sub, 0, "")
	terms := LeaseTerms{ID: r.Lease, Job: r.Job, Provider: prov.id, Submitter: sub.id, GPUs: r.GPUs, CPUs: 4, MemoryBytes: 8 << 30}
	if err := CheckHeld(&r, terms); err != nil {
		t.Fatalf("a receipt naming no resources: %v", err)
	}
	r.CPUs, r.MemoryBytes, r.DiskBytes = 4, 8<<30, 1<<40
	if err := CheckHeld(&r, terms); err != nil {
		t.Fatalf("a receipt naming the terms' resources: %v", err)
	}
	for name, bad := range map[string]func(*Receipt){
		"cpus":   func(r *Receipt) { r.CPUs = 8 },
		"memory": func(r *Receipt) { r.MemoryBytes = 16 << 30 },
	} {
		c := r
		bad(&c)
		if err := CheckHeld(&c, terms); !errors.Is(err, ErrInvalidReceipt) {
			t.Errorf("%s: %v, want ErrInvalidReceipt", name, err)
		}
	}
}

// A lease that held no GPU is counted in usage by what it did hold: its
// CPU-hours, owed as GPU-hours are, and the GiB-hours of its memory and
// disk; a receipt that names none of them counts nothing there.
func TestUsageCountsWhatJobsWithoutGPUsHeld(t *testing.T) {
	ctx := context.Background()
	prov, sub := newParty(t, 1), newParty(t, 2)
	l := openMem(t, Options{Self: prov.id})
	chain := func(lease string, n int, gpus, cpus int, outcome Outcome, attribution Attribution) []Receipt {
		var out []Receipt
		prev := ""
		for i := range n {
			r := interim(lease, "job-"+lease, prov, sub, uint64(i), prev)
			r.GPUs = gpus
			if cpus > 0 {
				r.CPUs, r.MemoryBytes, r.DiskBytes = cpus, 8<<30, 10<<30
			}
			if i == n-1 {
				r = final(r)
				r.Outcome, r.Attribution = outcome, attribution
			}
			r = sign(t, r, prov, sub)
			prev = r.Digest()
			out = append(out, r)
		}
		return out
	}
	mustAppend(t, l, chain("cpu", 3, 0, 4, OutcomeCompleted, AttributionJob)...)          // 4 CPUs × 3 min, owed
	mustAppend(t, l, chain("lost", 6, 0, 2, OutcomeProviderLost, AttributionProvider)...) // 2 CPUs × 6 min, not owed
	mustAppend(t, l, chain("old", 2, 1, 0, OutcomeCompleted, AttributionJob)...)          // a receipt from before the fields
	rep, err := l.Usage(ctx, UsageFilter{}, DefaultPolicy())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.ByPeer) != 1 {
		t.Fatalf("by peer: %+v", rep.ByPeer)
	}
	p := rep.ByPeer[0]
	near := func(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }
	want := struct{ cpu, owedCPU, mem, disk, gpu float64 }{
		cpu: (4*3 + 2*6) / 60.0, owedCPU: 4 * 3 / 60.0, mem: 8 * (3 + 6) / 60.0, disk: 10 * (3 + 6) / 60.0, gpu: 2 / 60.0,
	}
	if !near(p.CPUHours, want.cpu) || !near(p.OwedCPUHours, want.owedCPU) || !near(p.MemoryGiBHours, want.mem) ||
		!near(p.DiskGiBHours, want.disk) || !near(p.GPUHours, want.gpu) {
		t.Fatalf("usage %+v, want %+v", p, want)
	}
	held, err := l.HeldByJobs(ctx, DefaultPolicy(), "job-cpu", "job-lost")
	if err != nil {
		t.Fatal(err)
	}
	if !near(held.CPUHours, want.cpu) || !near(held.OwedCPUHours, want.owedCPU) || held.GPUHours != 0 {
		t.Fatalf("held by the jobs: %+v", held)
	}
}
