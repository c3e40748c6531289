package ledger

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// When a preempted lease's last checkpoint was taken is signed by both
// sides, survives JSON, never encodes like a receipt without it (with or
// without the fields before it), and is refused where it makes no sense.
func TestCheckpointAtSignedAndKept(t *testing.T) {
	prov, sub, relay := newParty(t, 1), newParty(t, 2), newParty(t, 3)
	base := final(interim("lease-1", "job-1", prov, sub, 1, hex.EncodeToString(make([]byte, 32))))
	base.Outcome, base.Attribution = OutcomePreempted, AttributionProvider
	plain := base.SigningBytes()

	r := base
	r.CheckpointAt = base.HeldFrom.Add(30 * time.Second)
	r = sign(t, r, prov, sub)
	if err := r.Verify(); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(r.SigningBytes(), plain) || len(r.SigningBytes()) == len(plain) {
		t.Fatal("checkpoint_at is not a tail after the old encoding")
	}
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeReceipt(data)
	if err != nil {
		t.Fatal(err)
	}
	if err := back.Verify(); err != nil || !back.CheckpointAt.Equal(r.CheckpointAt) {
		t.Fatalf("round trip: %v, checkpoint_at %s, want %s", err, back.CheckpointAt, r.CheckpointAt)
	}
	if b, _ := json.Marshal(base); strings.Contains(string(b), `"checkpoint_at"`) {
		t.Fatal("a receipt without checkpoint_at names the field")
	}

	withRelay, both := base, base
	withRelay.Relay = relay.id
	both.Relay, both.CheckpointAt = relay.id, r.CheckpointAt
	model := base
	model.GPUModel = "X"
	modelAt := model
	modelAt.CheckpointAt = r.CheckpointAt
	for _, pair := range [][2]Receipt{{withRelay, both}, {base, r}, {model, modelAt}, {withRelay, r}} {
		if bytes.Equal(pair[0].SigningBytes(), pair[1].SigningBytes()) {
			t.Fatal("distinct receipts encode alike")
		}
	}

	for name, bad := range map[string]func(*Receipt){
		"interim":       func(r *Receipt) { r.Final = false; r.Outcome, r.Attribution = "", ""; r.ExitCode, r.Reason = nil, "" },
		"no checkpoint": func(r *Receipt) { r.Checkpoint = "" },
		"before held":   func(r *Receipt) { r.CheckpointAt = r.HeldFrom.Add(-time.Second) },
		"after held":    func(r *Receipt) { r.CheckpointAt = r.HeldUntil.Add(time.Second) },
	} {
		x := r
		bad(&x)
		if err := x.Validate(); err == nil {
			t.Errorf("%s: checkpoint_at accepted", name)
		}
	}
}

// The default policy charges a preempted lease up to its last checkpoint
// and not after; without a checkpoint, nothing.
func TestPreemptedOwedToCheckpoint(t *testing.T) {
	prov, sub := newParty(t, 1), newParty(t, 2)
	l := openMem(t, Options{Self: sub.id})
	ctx := context.Background()
	add := func(lease string, at time.Duration) {
		r := final(interim(lease, "job-"+lease, prov, sub, 0, ""))
		r.HeldUntil = r.HeldFrom.Add(time.Hour)
		r.Outcome, r.Attribution = OutcomePreempted, AttributionProvider
		if at > 0 {
			r.CheckpointAt = r.HeldFrom.Add(at)
		} else {
			r.Checkpoint = ""
		}
		mustAppend(t, l, sign(t, r, prov, sub))
	}
	add("a", 15*time.Minute) // 2 GPUs: 0.5 GPU-hours owed of 2
	add("b", 0)              // no checkpoint: nothing owed of 2
	rep, err := l.Usage(ctx, UsageFilter{}, DefaultPolicy())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.ByPeer) != 1 || rep.ByPeer[0].GPUHours != 4 || rep.ByPeer[0].Owed != 0.5 {
		t.Fatalf("by peer %+v, want 4 GPU-hours held, 0.5 owed", rep.ByPeer)
	}
	held, err := l.HeldByJobs(ctx, DefaultPolicy(), "job-a", "job-b")
	if err != nil {
		t.Fatal(err)
	}
	if held.GPUHours != 4 || held.OwedGPUHours != 0.5 {
		t.Fatalf("held by the jobs %+v, want 4 GPU-hours, 0.5 owed", held)
	}
	since, err := l.Usage(ctx, UsageFilter{Since: t0.Add(10 * time.Minute)}, DefaultPolicy())
	if err != nil {
		t.Fatal(err)
	}
	if got := since.ByPeer[0].Owed; got < 0.1666 || got > 0.1667 {
		t.Fatalf("owed since 10 minutes in: %v GPU-hours, want 2 GPUs x 5 minutes", got)
	}
}
