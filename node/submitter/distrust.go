package submitter

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"time"

	"github.com/e31network/e31/node/state"
)

// A provider whose run lost a check of results (verifier.go) is distrusted
// by this node: its proposals for any job of this node are refused
// (wire.CodeDistrusted, claims.go) and each job it proposes for avoids it,
// announced, so that every peer's Match places the job elsewhere. A first
// loss lasts DistrustFor; each further loss twice the one before, up to
// MaxDistrustFor. It is this node's own knowledge, kept in its records.

// Bounds of a distrust.
const (
	DistrustFor    = 7 * 24 * time.Hour
	MaxDistrustFor = 90 * 24 * time.Hour
)

// Distrusted is one provider this node distrusts: how often it lost, the
// check it lost last, and until when.
type Distrusted struct {
	Provider string    `json:"provider"`
	Losses   int       `json:"losses"`
	Job      string    `json:"job"`
	At       time.Time `json:"at"`
	Until    time.Time `json:"until"`
}

// prefixDistrust keeps the distrusted providers in the record store.
const prefixDistrust = state.PrefixDistrust

type distrust struct {
	p *parts // immutable

	// loaded reads the records once, before the first question: a
	// caller that comes meanwhile waits for it rather than see none.
	loaded sync.Once
	// mu guards byProvider. A state lock.
	mu         sync.Mutex
	byProvider map[string]Distrusted
}

func newDistrust(p *parts) *distrust { return &distrust{p: p, byProvider: map[string]Distrusted{}} }

// distrustFor is how long the n-th loss (from 1) lasts.
func distrustFor(n int) time.Duration {
	d := DistrustFor
	for ; n > 1 && d < MaxDistrustFor; n-- {
		d *= 2
	}
	return min(d, MaxDistrustFor)
}

func (t *distrust) load() { t.loaded.Do(t.read) }

// read takes the distrusted providers from the records.
func (t *distrust) read() {
	got := map[string]Distrusted{}
	err := t.p.d.Records.Each(prefixDistrust, func(b []byte) error {
		var d Distrusted
		if json.Unmarshal(b, &d) == nil && d.Provider != "" {
			got[d.Provider] = d
		}
		return nil
	})
	if err != nil {
		t.p.log.Warn("read distrusted providers", "err", err)
	}
	t.mu.Lock()
	for k, d := range got {
		if _, ok := t.byProvider[k]; !ok {
			t.byProvider[k] = d
		}
	}
	t.mu.Unlock()
}

// add records that provider lost the check of job at at.
func (t *distrust) add(ctx context.Context, provider, job string, at time.Time) {
	t.load()
	t.mu.Lock()
	d := t.byProvider[provider]
	d.Provider, d.Job, d.At = provider, job, at
	d.Losses++
	d.Until = at.Add(distrustFor(d.Losses))
	t.byProvider[provider] = d
	t.mu.Unlock()
	if err := t.p.d.Records.Put(prefixDistrust, provider, d); err != nil {
		t.p.log.Warn("keep distrusted provider", "provider", provider, "err", err)
	}
	t.p.log.Warn("provider distrusted: it lost a check of results", "provider", provider, "job", job, "losses", d.Losses, "until", d.Until.UTC().Format(time.RFC3339))
}

// of says whether provider is distrusted now, and until when.
func (t *distrust) of(provider string, now time.Time) (Distrusted, bool) {
	t.load()
	t.mu.Lock()
	defer t.mu.Unlock()
	d, ok := t.byProvider[provider]
	return d, ok && now.Before(d.Until)
}

// list is every provider distrusted now, latest loss first.
func (t *distrust) list(now time.Time) []Distrusted {
	t.load()
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []Distrusted
	for _, d := range t.byProvider {
		if now.Before(d.Until) {
			out = append(out, d)
		}
	}
	slices.SortFunc(out, func(a, b Distrusted) int { return b.At.Compare(a.At) })
	return out
}
