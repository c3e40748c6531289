package submitter

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
)

type fixedDigests []market.Digest

func (d fixedDigests) Digests() []market.Digest { return d }

func TestMarketsChoose(t *testing.T) {
	h100 := p2p.Shard{Class: "H100x1-4", Index: 1, Count: 2}
	consumer := p2p.Shard{Class: "consumer-24G", Count: 1}
	cpu := p2p.Shard{Class: "cpu", Count: 1}
	first := func(int) int { return 0 }
	for _, tc := range []struct {
		name    string
		own     p2p.Shard
		digests fixedDigests
		req     market.Request
		want    p2p.Shard
		err     string
	}{
		{name: "its own class fits", own: h100, req: market.Request{GPUs: 1, GPUModel: "H100"}, want: h100},
		{name: "a model of another class", own: h100, req: market.Request{GPUs: 1, GPUModel: "A100"}, err: "H100x1-4:1/2"},
		{name: "more GPUs than its boxes hold", own: h100, req: market.Request{GPUs: 8}, err: "8 GPUs"},
		{name: "memory a consumer card has", own: consumer, req: market.Request{GPUs: 1, GPUMemory: 20 * market.GiB}, want: consumer},
		{name: "memory no consumer card has", own: consumer, req: market.Request{GPUs: 1, GPUMemory: 40 * market.GiB}, err: "consumer-24G"},
		{name: "a CPU job anywhere", own: cpu, req: market.Request{CPUs: 2}, want: cpu},
		{name: "a GPU job from a CPU node", own: cpu, req: market.Request{GPUs: 1}, err: "cpu"},
		{
			name: "digests of markets it does not follow", own: h100, req: market.Request{GPUs: 1},
			digests: fixedDigests{{Class: "H100x8", Count: 1, Providers: 9, FreeBoxes: []int{0, 0, 0, 0, 0, 0, 0, 0, 9}}},
			want:    h100,
		},
		{
			name: "a job the digests show fits elsewhere", own: cpu, req: market.Request{GPUs: 8, GPUModel: "H100"},
			digests: fixedDigests{{Class: "H100x8", Count: 1, Providers: 9}},
			err:     "the digests show it fits H100x8:0/1",
		},
		{
			name: "a digest of its own market", own: cpu, req: market.Request{},
			digests: fixedDigests{{Class: "cpu", Providers: 3}, {Class: "H100x8", Count: 1, Providers: 9}},
			want:    cpu,
		},
	} {
		m := &Markets{Own: tc.own, Draw: first}
		if tc.digests != nil {
			m.Digests = tc.digests
		}
		got, err := m.choose(tc.req, nil)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %+v, %v; want an error naming %q", tc.name, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
}

// In a network split by class, a job's declaration names the market it is
// declared in, and a job no market here fits is refused as invalid before
// anything is announced.
func TestSubmitNamesItsMarket(t *testing.T) {
	h := newHarness(t, Config{}, noOffers{})
	own := p2p.Shard{Class: "H100x1-4", Index: 1, Count: 2}
	h.s.d.Markets = &Markets{Own: own}
	submit := func(gpus int, model string) (api.Job, error) {
		d := market.NewDeclaration("t", []string{"true"}, gpus, market.Hour, nil)
		d.Request.GPUModel = model
		raw, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		return h.s.Submit(context.Background(), api.SubmitRequest{Declaration: raw}, nil)
	}
	j, err := submit(1, "H100")
	if err != nil {
		t.Fatal(err)
	}
	env, err := p2p.Open(h.s.jobs.get(j.ID).snapshot().Envelope)
	if err != nil {
		t.Fatal(err)
	}
	var b wire.DeclarationBody
	if err := env.Decode(&b); err != nil {
		t.Fatal(err)
	}
	if b.Market == nil || *b.Market != own {
		t.Fatalf("declared in %v, want %v", b.Market, own)
	}
	if err := wire.CheckMarket(b, own); err != nil {
		t.Fatalf("its own scope refuses it: %v", err)
	}
	announced := h.gossip.rawCount()
	if _, err := submit(1, "A100"); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "H100x1-4") {
		t.Fatalf("a job for an A100 from an H100 node: %v, want invalid naming the class", err)
	}
	if h.gossip.rawCount() != announced {
		t.Fatal("the refused job was announced")
	}
}
