package market

import (
	"math/rand/v2"
	"testing"
)

func digest(c Class, i, providers, queued int, free ...int) Digest {
	return Digest{Class: c, Index: i, Count: 4, Providers: providers, FreeBoxes: free, Queued: queued}
}

func TestRouteTakesAFittingSubshardWithMoreHeadroom(t *testing.T) {
	ds := []Digest{
		digest("H100x8", 0, 10, 5, 5, 0, 0, 0, 0, 0, 0, 0, 5), // 5 free boxes, 5 queued
		digest("H100x8", 1, 10, 0, 2, 0, 0, 0, 0, 0, 0, 0, 8), // 8 free boxes
		digest("A100x8", 0, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 10),
		digest("cpu", 0, 100, 0, 100),
	}
	r := Request{GPUs: 8, GPUModel: "H100"}
	for seed := range uint64(50) {
		rng := rand.New(rand.NewPCG(seed, 1))
		d, ok := Route(r, nil, ds, rng.IntN)
		if !ok || d.Class != "H100x8" || d.Index != 1 {
			t.Fatalf("seed %d: routed to %+v, %v; want H100x8 subshard 1, the only two fit and it has more headroom", seed, d, ok)
		}
	}
	if _, ok := Route(Request{GPUs: 8, GPUModel: "B200"}, nil, ds, rand.IntN); ok {
		t.Error("a B200 job was routed where no B200 is offered")
	}
	if _, ok := Route(Request{GPUs: 8, Nodes: 20}, nil, ds, rand.IntN); ok {
		t.Error("a gang of 20 was routed to a subshard of 10 providers")
	}
}

func TestRouteFollowsTheData(t *testing.T) {
	ds := []Digest{
		digest("H100x8", 0, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 10),
		digest("H100x8", 1, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1),
	}
	ds[1].Held = []HeldRoot{{Root: "bafyinput", Bytes: 1 << 40, Holders: 3}}
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 2))
		if d, _ := Route(Request{GPUs: 8}, []string{"bafyinput"}, ds, rng.IntN); d.Index != 1 {
			t.Fatalf("seed %d: routed to subshard %d, want 1, which holds the input and has room", seed, d.Index)
		}
	}
}

// TestRouteSpreadsLoad: with many equal subshards, two random choices
// spread jobs over all of them rather than herd to one.
func TestRouteSpreadsLoad(t *testing.T) {
	var ds []Digest
	for i := range 16 {
		ds = append(ds, digest("H100x1-4", i, 100, 0, 0, 100))
	}
	hits := map[int]int{}
	rng := rand.New(rand.NewPCG(7, 7))
	for range 1600 {
		d, _ := Route(Request{GPUs: 1}, nil, ds, rng.IntN)
		hits[d.Index]++
		ds[d.Index].Queued++ // each job queues where it went
	}
	for i := range 16 {
		if hits[i] < 80 || hits[i] > 120 {
			t.Errorf("subshard %d got %d of 1600 jobs; want about 100", i, hits[i])
		}
	}
}

func TestMoveOnlyAfterWaitingWithoutRoom(t *testing.T) {
	here := digest("H100x8", 0, 10, 20, 10)
	there := digest("H100x8", 1, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4)
	r := Request{GPUs: 8}
	if _, ok := Move(r, nil, Minute, 0, here, []Digest{here, there}, rand.IntN); ok {
		t.Error("moved before MoveAfter")
	}
	d, ok := Move(r, nil, MoveAfter, 0, here, []Digest{here, there}, rand.IntN)
	if !ok || d.Index != 1 {
		t.Errorf("after waiting: %+v %v, want subshard 1", d, ok)
	}
	if _, ok := Move(r, nil, 10*Second, 10*Second, here, []Digest{here, there}, rand.IntN); !ok {
		t.Error("not moved after a bound of its own")
	}
	if _, ok := Move(r, nil, 10*Second-1, 10*Second, here, []Digest{here, there}, rand.IntN); ok {
		t.Error("moved before a bound of its own")
	}
	roomy := digest("H100x8", 0, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4)
	if _, ok := Move(r, nil, Hour, 0, roomy, []Digest{roomy, there}, rand.IntN); ok {
		t.Error("moved from a subshard with headroom")
	}
}

// TestRouteFillsSmallBoxesFirst: a one-GPU job goes to the class of small
// boxes while it has room, as Match in one market fills the smallest box
// first, and only then to idle 8-GPU boxes a whole-box job needs.
func TestRouteFillsSmallBoxesFirst(t *testing.T) {
	small := digest("H100x1-4", 0, 10, 0, 0, 10)
	big := digest("H100x8", 0, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 10)
	r := Request{GPUs: 1, GPUModel: "H100"}
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 3))
		if d, _ := Route(r, nil, []Digest{big, small}, rng.IntN); d.Class != "H100x1-4" {
			t.Fatalf("seed %d: a one-GPU job went to %s while the small boxes had room", seed, d.Class)
		}
	}
	full := small
	full.Queued = 20
	if d, _ := Route(r, nil, []Digest{big, full}, rand.IntN); d.Class != "H100x8" {
		t.Errorf("with the small boxes full, the job went to %s; want the 8-GPU boxes with room", d.Class)
	}
	if d, _ := Route(Request{}, nil, []Digest{big, digest("cpu", 0, 5, 0, 5)}, rand.IntN); d.Class != ClassCPU {
		t.Errorf("a CPU job went to %s while CPU boxes had room", d.Class)
	}
}

// TestRouteWeighsHolders: of two subshards that hold a job's input, the
// one with more holders wins.
func TestRouteWeighsHolders(t *testing.T) {
	a := digest("H100x8", 0, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 10)
	b := digest("H100x8", 1, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2)
	a.Held = []HeldRoot{{Root: "bafyinput", Holders: 1}}
	b.Held = []HeldRoot{{Root: "bafyinput", Holders: 6}}
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 4))
		if d, _ := Route(Request{GPUs: 8}, []string{"bafyinput"}, []Digest{a, b}, rng.IntN); d.Index != 1 {
			t.Fatalf("seed %d: went to subshard %d, want 1 with 6 holders", seed, d.Index)
		}
	}
}
