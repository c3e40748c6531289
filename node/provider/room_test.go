package provider

import (
	"testing"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/diskroom"
	"github.com/e31network/e31/node/view"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/node/wire/wiretest"
	"github.com/e31network/e31/testnet/poll"
	"github.com/libp2p/go-libp2p/core/peer"
)

// jobs is a view's open jobs, by ID.
type jobs map[string]*view.OpenJob

func (j jobs) Job(id string) (*view.OpenJob, bool) { o, ok := j[id]; return o, ok }
func (jobs) Decline(string, peer.ID, time.Time)    {}

// A job whose disk the data dir has no room for beside the other grants is
// not proposed, and its GPUs stay free; what a proposal holds goes back
// when it is declined; and a job without GPUs is not proposed where the
// node takes none.
func TestProposalNeedsRoomForItsDisk(t *testing.T) {
	sub := wiretest.FreshParty(t)
	room, err := diskroom.Open(diskroom.Options{Dir: t.TempDir(), Free: 30 * market.GiB}) // reserve and cap 7.5 GiB
	if err != nil {
		t.Fatal(err)
	}
	open := func(id string, gpus int, disk market.Size) *view.OpenJob {
		d := market.NewDeclaration(id, []string{"true"}, gpus, market.Hour, nil)
		d.Request.Disk = disk
		return &view.OpenJob{ID: id, Submitter: sub.ID, Body: wire.DeclarationBody{Declaration: d}}
	}
	js := jobs{"big": open("big", 1, 7*market.GiB), "other": open("other", 1, 7*market.GiB), "cpu": open("cpu", 0, market.GiB)}
	calls := &proposals{moved: make(chan struct{}, 4)}
	p, _ := sourcesProvider(t, Config{DataDir: t.TempDir(), ProposalTTL: time.Second, NoCPUJobs: true}, &sourceFetcher{}, calls, js)
	p.d.Store, p.d.Runner, p.d.AddrBook, p.d.Room = &exports{}, idleRunner{}, noAddrs{}, room
	p.disk.room = room

	// Another proposal holds 7 GiB's room: with it, 22.5 GiB to lend
	// leave too little for a second job of 7 GiB (each may take 14.5).
	if err := room.Hold("held-elsewhere", diskroom.NeedOf(7*market.GiB, 0)); err != nil {
		t.Fatal(err)
	}
	p.Propose(market.Assignment{Job: "big", Provider: p.d.Self.String(), GPUs: []string{"GPU-0"}}, 1, "view")
	if n := calls.count(); n != 0 || len(p.HeldGPUs()) != 0 {
		t.Fatalf("no room: %d proposals, GPUs held %v", n, p.HeldGPUs())
	}
	p.Propose(market.Assignment{Job: "cpu", Provider: p.d.Self.String()}, 1, "view")
	if n := calls.count(); n != 0 {
		t.Fatalf("a job without GPUs proposed on a node that takes none")
	}

	// The other proposal comes to nothing: the room is back, the job is
	// proposed, declined, and its room given back in turn.
	room.Drop("held-elsewhere")
	p.Propose(market.Assignment{Job: "other", Provider: p.d.Self.String(), GPUs: []string{"GPU-0"}}, 2, "view")
	select {
	case <-calls.moved:
	case <-time.After(10 * time.Second):
		t.Fatal("no proposal once the room was back")
	}
	poll.Until(t, "the declined proposal's room to come back", 10*time.Second, func() bool { return room.Status().Jobs == 0 })
	if _, why := room.Offered(); why != "" {
		t.Fatalf("the room lends no disk: %s", why)
	}
}
