package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/content/image"
	"github.com/e31network/e31/exec"
	"github.com/e31network/e31/exec/layers"
	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/ledger/ledgertest"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/state/statetest"
	"github.com/e31network/e31/node/wire/wiretest"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestRefusedContentTellsTheJobsFaultFromOurs(t *testing.T) {
	entry := &layers.EntryError{Entry: "../x", Err: layers.ErrUnsafePath}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("image x: layer 0 (sha256:ab): %w", entry), true},
		{fmt.Errorf("layer: %w: unexpected EOF", layers.ErrMalformed), true},
		{fmt.Errorf("load: %w: index.json", image.ErrInvalid), true},
		{fmt.Errorf("read: %w", image.ErrDigestMismatch), true},
		{fmt.Errorf("data[0]: lay out: %w", content.ErrUnsafeName), true},
		{fmt.Errorf("data[0]: lay out: %w", &content.LimitError{Limit: "entries", Cap: 10, Got: 11}), true},
		{fmt.Errorf("data[0]: fetch: %w: peer says: no block", content.ErrNotFound), true},
		{fmt.Errorf("data[0]: fetch: %w", content.ErrStalled), false},
		{fmt.Errorf("layer cache: %w", layers.ErrClosed), false},
		{errors.New("write: no space left on device"), false},
		{context.Canceled, false},
	} {
		if got := refusedContent(tc.err); got != tc.want {
			t.Errorf("refusedContent(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestClipReasonFitsAReceipt(t *testing.T) {
	long := strings.Repeat("é", 2000) + "\xff"
	got := clipReason(long)
	if len(got) > maxReason || !utf8.ValidString(got) || !strings.HasSuffix(got, "…") {
		t.Fatalf("clipped to %d bytes (valid %v): ...%q", len(got), utf8.ValidString(got), got[max(0, len(got)-10):])
	}
	if s := "short reason"; clipReason(s) != s {
		t.Fatalf("a short reason changed: %q", clipReason(s))
	}
}

// A restart ends a lease whose content it was parsing as failed, so that
// the submitter does not resume it on the next provider; any other open
// lease is provider-lost, as before.
func TestRestartEndsALeaseStoppedWhileHandlingItsContent(t *testing.T) {
	for _, tc := range []struct {
		rec         Record
		outcome     ledger.Outcome
		attribution ledger.Attribution
	}{
		{Record{State: Staging, Handling: "unpacking the image (bafy)"}, ledger.OutcomeFailed, ledger.AttributionProvider},
		{Record{State: Output, Handling: "importing the output"}, ledger.OutcomeFailed, ledger.AttributionProvider},
		{Record{State: Staging}, ledger.OutcomeProviderLost, ledger.AttributionProvider},
		{Record{State: Running}, ledger.OutcomeProviderLost, ledger.AttributionProvider},
		{Record{State: Staging, Outcome: ledger.OutcomeFailed, Attribution: ledger.AttributionJob}, ledger.OutcomeFailed, ledger.AttributionJob},
		// A completed run whose output was not taken: nothing to show.
		{Record{State: Running, Outcome: ledger.OutcomeCompleted, Attribution: ledger.AttributionJob}, ledger.OutcomeProviderLost, ledger.AttributionProvider},
		{Record{State: Output, Outcome: ledger.OutcomeCompleted, Attribution: ledger.AttributionJob, Handling: "importing the output"}, ledger.OutcomeFailed, ledger.AttributionProvider},
		{Record{State: Output, Outcome: ledger.OutcomeCompleted, Attribution: ledger.AttributionJob, Output: "bafyout"}, ledger.OutcomeCompleted, ledger.AttributionJob},
	} {
		r := tc.rec
		endInterrupted(&r)
		if r.Outcome != tc.outcome || r.Attribution != tc.attribution || r.Handling != "" {
			t.Errorf("%+v ended %s/%s (handling %q), want %s/%s", tc.rec, r.Outcome, r.Attribution, r.Handling, tc.outcome, tc.attribution)
		}
		if tc.rec.Handling != "" && !strings.Contains(r.Reason, tc.rec.Handling) {
			t.Errorf("reason %q does not say what was being handled", r.Reason)
		}
	}
}

// imageStage is a provider's way to an image for these tests: the fetch
// finds everything held, and Prepare does what the test says.
type imageStage struct {
	prepare func() (*exec.ImageRoot, func(), error)
}

func (s imageStage) Pull(context.Context, string, string) (cid.Cid, error) {
	return cid.Undef, errors.New("no registry here")
}
func (s imageStage) Prepare(context.Context, cid.Cid) (*exec.ImageRoot, func(), error) {
	return s.prepare()
}
func (s imageStage) Fetch(context.Context, peer.ID, cid.Cid, content.FetchOptions) (content.FetchStats, error) {
	return content.FetchStats{Method: "local"}, nil
}
func (s imageStage) FetchFrom(context.Context, []peer.ID, cid.Cid, content.FetchOptions) (content.FetchStats, error) {
	return content.FetchStats{Method: "local"}, nil
}

// runImageLease carries one signed lease of an image job through the
// provider, its submitter absent, and returns its record once settled, with
// the reason of the provider's final record (the lease's own is replaced
// once the submitter is given up for gone).
func runImageLease(t *testing.T, prepare func() (*exec.ImageRoot, func(), error)) (Record, *Provider, float64) {
	t.Helper()
	var rec Record
	var p *Provider
	var panics float64
	synctest.Test(t, func(t *testing.T) {
		self := wiretest.FreshParty(t)
		records := &statetest.Records{}
		led := &ledgertest.Memory{}
		p = newTestProvider(t, self, Config{ReceiptInterval: time.Minute, OutputTimeout: time.Minute, Retention: time.Hour,
			ReceiptTimeout: time.Second, EventTimeout: time.Second, DataDir: t.TempDir()},
			&absent{calls: map[protocol.ID]int{}}, &unpins{}, records, led)
		counter := prometheus.NewCounter(prometheus.CounterOpts{Name: "panics"})
		p.d.Metrics.Panics = counter
		stage := imageStage{prepare: prepare}
		p.d.Images, p.d.Fetcher = stage, stage
		d := market.NewDeclaration("t", []string{"true"}, 1, market.Hour, nil)
		d.Work.Image = wiretest.CID(t, "image")
		sub := wiretest.FreshParty(t)
		l := p.newRunner(&Record{Lease: wiretest.SignedLease(t, self, sub), Declaration: d, State: Held, Start: time.Now()}, sub.ID)
		id := l.rec.ID()
		p.holds.signed(l.rec.Lease.Terms)
		p.leases.add(l)
		p.start(l)
		if err := p.tasks.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		rec = stored(t, records, id)
		oneSided := led.OneSided()
		if len(oneSided) != 1 {
			t.Fatalf("%d final records of the provider's own, want 1", len(oneSided))
		}
		rec.Reason = oneSided[0].Reason
		panics = testutil.ToFloat64(counter)
	})
	return rec, p, panics
}

func TestLeaseWithARefusedImageFailsTheJob(t *testing.T) {
	refused := fmt.Errorf("layer 1 (sha256:ab): %w", &layers.EntryError{Entry: "etc/pw-hard", Err: layers.ErrBadLink})
	rec, p, panics := runImageLease(t, func() (*exec.ImageRoot, func(), error) { return nil, nil, refused })
	if rec.Outcome != ledger.OutcomeFailed || rec.Attribution != ledger.AttributionJob {
		t.Fatalf("ended %s/%s (%s), want failed/job", rec.Outcome, rec.Attribution, rec.Reason)
	}
	if !strings.Contains(rec.Reason, "etc/pw-hard") || !strings.Contains(rec.Reason, "layer 1") {
		t.Fatalf("reason %q does not name the layer and the entry", rec.Reason)
	}
	if rec.State != Released || rec.Handling != "" {
		t.Fatalf("state %s, handling %q: want released, nothing in hand", rec.State, rec.Handling)
	}
	if c := p.Counts(); c.Held != 0 || panics != 0 {
		t.Fatalf("%d GPUs still held, %v panics", c.Held, panics)
	}
}

func TestLeaseThatPanicsIsContained(t *testing.T) {
	rec, p, panics := runImageLease(t, func() (*exec.ImageRoot, func(), error) {
		var m map[string]int
		m["boom"]++ // a nil map: a bug of ours that content reached
		return nil, nil, nil
	})
	if rec.Outcome != ledger.OutcomeFailed || rec.Attribution != ledger.AttributionProvider || !strings.Contains(rec.Reason, "internal error") {
		t.Fatalf("ended %s/%s (%s), want failed/provider, internal error", rec.Outcome, rec.Attribution, rec.Reason)
	}
	if rec.State != Released {
		t.Fatalf("state %s, want released", rec.State)
	}
	if c := p.Counts(); c.Held != 0 {
		t.Fatalf("%d GPUs still held after the panic", c.Held)
	}
	if panics != 1 {
		t.Fatalf("%v panics counted, want 1", panics)
	}
}
