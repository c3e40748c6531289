package node

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/view"
	"github.com/e31network/e31/testnet/poll"
)

func submitYAML(t *testing.T, n *testNode, gpus int, limit string) string {
	t.Helper()
	decl := fmt.Sprintf(`name: t
work: {command: ["true"]}
request: {gpus: %d, cpus: 1, memory: 1GiB, limit: %s}
output: {path: /out}
`, gpus, limit)
	j, err := n.submitter.Submit(context.Background(), api.SubmitRequest{Declaration: []byte(decl)}, nil)
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	return j.ID
}

// fastAssigned returns the pass between epochs that assigned job.
func fastAssigned(n *testNode, job string) (api.Match, bool) {
	ms := n.net.Matches()
	i := slices.IndexFunc(ms, func(m api.Match) bool {
		return m.Fast && slices.ContainsFunc(m.Assignments, func(a market.Assignment) bool { return a.Job == job })
	})
	if i < 0 {
		return api.Match{}, false
	}
	return ms[i], true
}

// On an idle network a job is leased without waiting for an epoch: with
// the longest epochs, a minute, the lease comes from a pass between epochs.
func TestFastPathLeasesBetweenEpochs(t *testing.T) {
	runner := newFakeRunner(true)
	prov := startNode(t, nodeOpts{gpus: "1xH100:80GiB", runner: runner, epoch: view.MaxEpoch})
	poll.Until(t, "provider ready", 10*time.Second, func() bool { return len(prov.Addrs()) > 0 })
	sub := startNode(t, nodeOpts{boot: prov.Addrs()[:1], epoch: view.MaxEpoch})
	poll.Until(t, "the submitter to see the provider's offer", 15*time.Second, func() bool { return len(sub.net.Nodes()) == 1 })

	id := submit(t, sub)
	waitState(t, sub, id, api.JobReleased, 30*time.Second)
	if _, ok := fastAssigned(prov, id); !ok {
		t.Fatalf("no pass between epochs assigned %s: %+v", id, prov.net.Matches())
	}
}

// The fast path is the epoch's Match run early: capacity that Match keeps
// for a waiting job (a reservation) is not given to a newer job that could
// use it now, where "the GPUs are free" alone would.
func TestFastPathKeepsReservation(t *testing.T) {
	runner := newFakeRunner(false)
	prov := startNode(t, nodeOpts{gpus: "4xH100:80GiB", runner: runner})
	poll.Until(t, "provider ready", 10*time.Second, func() bool { return len(prov.Addrs()) > 0 })
	sub := startNode(t, nodeOpts{boot: prov.Addrs()[:1]})
	poll.Until(t, "the submitter to see the provider's offer", 15*time.Second, func() bool { return len(sub.net.Nodes()) == 1 })

	// Two of the four GPUs held for up to an hour.
	a := submitYAML(t, sub, 2, "1h")
	waitState(t, sub, a, api.JobRunning, 30*time.Second)
	// A 4-GPU job cannot start; Match reserves the provider for it.
	w := submitYAML(t, sub, 4, "1h")
	// Wait until an epoch has fixed its age on the provider: a job declared
	// in the same epoch would be as old, and Match would break the tie.
	poll.Until(t, "an epoch pass on the provider that sees the 4-GPU job", 15*time.Second, func() bool {
		return slices.ContainsFunc(prov.net.Matches(), func(m api.Match) bool { return !m.Fast && m.Jobs == 1 && len(m.Assignments) == 0 })
	})
	// A 2-GPU job for two hours would fit the free GPUs now, but would still
	// hold them when the reservation starts.
	j := submitYAML(t, sub, 2, "2h")
	poll.Until(t, "a pass between epochs that sees both waiting jobs", 15*time.Second, func() bool {
		for _, m := range prov.net.Matches() {
			if m.Fast && m.Jobs == 2 {
				return true
			}
		}
		return false
	})
	// And the epochs after it agree.
	poll.Until(t, "an epoch pass that sees both waiting jobs", 15*time.Second, func() bool {
		for _, m := range prov.net.Matches() {
			if !m.Fast && m.Jobs == 2 {
				return true
			}
		}
		return false
	})
	for _, id := range []string{w, j} {
		if st := job(t, sub, id).State; st != api.JobQueued {
			t.Fatalf("job %s is %s, want queued behind the reservation", id, st)
		}
	}
	if c := prov.provider.Counts(); c.Held != 2 {
		t.Fatalf("provider holds %d GPUs, want the first job's 2", c.Held)
	}
}

// A lease and its release carry the GPUs' state to every peer in their own
// announcements: the provider does not publish its offer for them (only its
// heartbeat does), and a peer still shows the GPU held while the lease
// lasts and free after it.
func TestLeaseAnnouncementsCarryTheOffer(t *testing.T) {
	const heartbeat = 2 * time.Second
	runner := newFakeRunner(false)
	prov := startNode(t, nodeOpts{gpus: "1xH100:80GiB", runner: runner, heartbeat: heartbeat})
	poll.Until(t, "provider ready", 10*time.Second, func() bool { return len(prov.Addrs()) > 0 })
	sub := startNode(t, nodeOpts{boot: prov.Addrs()[:1], heartbeat: heartbeat})
	poll.Until(t, "the submitter to see the provider's offer", 15*time.Second, func() bool { return len(sub.net.Nodes()) == 1 })
	first := sub.net.Nodes()[0].SignedAt
	poll.Until(t, "a heartbeat", 3*heartbeat, func() bool { return sub.net.Nodes()[0].SignedAt.After(first) })
	beat := sub.net.Nodes()[0].SignedAt
	// Any offer signed after beat but sooner than this was published for
	// the lease or its release, not by the heartbeat.
	soonest := beat.Add(heartbeat * 3 / 4)
	checkOffer := func(when string) {
		t.Helper()
		if got := sub.net.Nodes()[0].SignedAt; got.After(beat) && got.Before(soonest) {
			t.Fatalf("%s: the provider published its offer %s after its heartbeat", when, got.Sub(beat))
		}
	}
	gpuFree := func() bool { return sub.net.Nodes()[0].GPUs[0].Free }
	if !gpuFree() {
		t.Fatal("the GPU shows held before any job")
	}

	id := submit(t, sub)
	poll.Until(t, "the submitter to show the GPU held", 10*time.Second, func() bool { return !gpuFree() })
	checkOffer("leased")
	close(runner.gate)
	waitState(t, sub, id, api.JobReleased, 30*time.Second)
	poll.Until(t, "the submitter to show the GPU free again", 10*time.Second, gpuFree)
	checkOffer("released")

	// And the GPU is matched again at once: a second job runs.
	id2 := submit(t, sub)
	waitState(t, sub, id2, api.JobReleased, 30*time.Second)
}
