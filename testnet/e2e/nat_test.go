package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/testnet/cluster"
	"github.com/e31network/e31/testnet/netns"
)

// TestNAT runs real daemons on the small internet of testnet/netns: a
// bootstrap peer serving as a relay in Pub, a provider behind RouterA and a
// submitter behind RouterB, each with NAT traversal on as in production.
// The two parts build their own internets and run side by side.
func TestNAT(t *testing.T) {
	requireSandbox(t)
	if testing.Short() && os.Getenv(netns.RequireEnv) == "" {
		t.Skip("builds network namespaces and waits for AutoNAT; skipped in -short mode")
	}
	t.Run("hole punched", func(t *testing.T) {
		t.Parallel()
		natHolePunched(t)
	})
	t.Run("filtering router", func(t *testing.T) {
		t.Parallel()
		natFilteringRouter(t)
	})
}

// natHolePunched: a job submitted behind NAT B runs on the provider behind
// NAT A over a hole-punched connection, its input staged and its output
// returned; then a second job goes on to completion with the bootstrap peer
// (the relay) killed mid-run.
func natHolePunched(t *testing.T) {
	nn := startNATNet(t, false)
	sub := nn.client(nn.sub)

	in, want := natInput(t)
	d := decl("nat-copy", "cp /data/blob /out/blob; echo copied", 1, time.Minute)
	d.Data = []market.Input{{Source: in, Mount: "/data"}}
	j := submit(t, sub, d)
	j = waitJob(t, sub, j.ID, 60*time.Second, "release", released)
	if j.Outcome != "completed" || j.Provider != nn.prov.PeerID {
		t.Fatalf("job ended %s/%s on %s (reason %q), want completed on the provider %s", j.Outcome, j.Attribution, j.Provider, j.Reason, nn.prov.PeerID)
	}
	natCheckOutput(t, sub, j.ID, want)

	// The submitter reaches the provider directly, at RouterA's wan
	// address: the only way there from HomeB is a hole through both
	// routers. e31 peers, as a user would ask.
	p := nn.peer(t, nn.sub, nn.prov.PeerID)
	if p.Path != "direct" {
		t.Fatalf("submitter reaches the provider %s (%s), want direct; connections %v", p.Path, p.PathReason, p.Addrs)
	}
	if !slices.ContainsFunc(p.Addrs, func(a string) bool {
		return strings.HasPrefix(a, "/ip4/"+netns.RouterAIP+"/") && !strings.Contains(a, "/p2p-circuit")
	}) {
		t.Fatalf("no direct connection to the provider's router %s: %v", netns.RouterAIP, p.Addrs)
	}

	t.Run("bootstrap killed mid-run", func(t *testing.T) {
		in, want := natInput(t)
		// Long enough for the bootstrap peer to die under it.
		d := decl("nat-outlive", "sleep 4; cp /data/blob /out/blob", 1, time.Minute)
		d.Data = []market.Input{{Source: in, Mount: "/data"}}
		j := submit(t, sub, d)
		waitJob(t, sub, j.ID, 60*time.Second, "the run", func(j api.Job) bool { return j.State == api.JobRunning })
		if err := nn.boot.Kill(); err != nil {
			t.Fatal(err)
		}
		j = waitJob(t, sub, j.ID, 60*time.Second, "release", released)
		if j.Outcome != "completed" {
			t.Fatalf("job ended %s/%s (reason %q) with the bootstrap peer gone, want completed", j.Outcome, j.Attribution, j.Reason)
		}
		natCheckOutput(t, sub, j.ID, want)
		if f := waitFinal(t, nn.client(nn.prov), j.ID); f.Outcome != "completed" || f.Signer != "" {
			t.Fatalf("provider's final receipt: %s, signer %q; want completed, signed by both", f.Outcome, f.Signer)
		}
	})
}

// natFilteringRouter: RouterA lets nothing in but the bootstrap peer, so no
// hole can be punched. The lease is still made, over the relay, and staging
// then fails after waiting for a direct path, naming why: a relay carries
// the lease's messages, not its data.
func natFilteringRouter(t *testing.T) {
	nn := startNATNet(t, true)
	sub := nn.client(nn.sub)

	in, _ := natInput(t)
	d := decl("nat-filtered", "cp /data/blob /out/blob", 1, time.Minute)
	d.Data = []market.Input{{Source: in, Mount: "/data"}}
	j := submit(t, sub, d)
	// The lease is signed by both sides, over the relay: the job reaches
	// rent.
	j = waitJob(t, sub, j.ID, 60*time.Second, "the lease", func(j api.Job) bool { return !stepAt(j, api.StepRent).IsZero() })
	if j.Provider != nn.prov.PeerID {
		t.Fatalf("leased to %s, want the provider %s", j.Provider, nn.prov.PeerID)
	}
	if p := nn.peer(t, nn.sub, nn.prov.PeerID); p.Path != "relayed" {
		t.Fatalf("submitter reaches the provider %s, want relayed; connections %v", p.Path, p.Addrs)
	}
	j = waitJob(t, sub, j.ID, 90*time.Second, "release", released)
	if j.Outcome != "failed" || j.Attribution != "network" {
		t.Fatalf("job ended %s/%s (reason %q), want failed/network", j.Outcome, j.Attribution, j.Reason)
	}
	for _, w := range []string{"staging", "no direct connection to the submitter", "only a relayed one", "hole punch"} {
		if !strings.Contains(j.Reason, w) {
			t.Fatalf("status reason %q does not say %q", j.Reason, w)
		}
	}
	if slices.Contains(stepNames(j), "run") {
		t.Fatalf("steps %v: the job ran without its input", stepNames(j))
	}
}

// natNet is one internet with its three daemons.
type natNet struct {
	net             *netns.Net
	boot, prov, sub *cluster.Node
}

// natArgs are the flags every daemon of a natNet shares: NAT traversal on
// as in production, with the test's private "internet" counted as public.
func natArgs() []string {
	return []string{"--network", "nat", "--heartbeat", "1s", "--nat", "on", "--nat-public-net", netns.Internet}
}

// startNATNet builds an internet and starts its daemons, and returns once
// the submitter and the provider each hold a relay slot and the submitter
// sees the provider's offer as reachable through the relay.
func startNATNet(t *testing.T, filter bool) *natNet {
	t.Helper()
	nn := &natNet{net: netns.NewForTest(t, netns.Options{Filter: filter})}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start := func(name, ns string, args ...string) *cluster.Node {
		t.Helper()
		prefix := []string{"nsenter", "--net=/run/netns/" + ns, "--"}
		n, err := cluster.StartNode(ctx, bin, name, filepath.Join(dir, name), prefix, append(natArgs(), args...))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(n.Stop)
		t.Cleanup(func() {
			if t.Failed() {
				natLogTail(t, n)
			}
		})
		return n
	}
	nn.boot = start("bootstrap", nn.net.Pub, "--relay-service",
		"--listen", "/ip4/"+netns.PubIP+"/tcp/4001", "--listen", "/ip4/"+netns.PubIP+"/udp/4001/quic-v1")
	home := []string{"--listen", "/ip4/0.0.0.0/tcp/4001", "--listen", "/ip4/0.0.0.0/udp/4001/quic-v1"}
	for _, a := range nn.boot.Addrs {
		home = append(home, "--bootstrap", a)
	}
	nn.prov = start("provider", nn.net.HomeA, append(home, "--sim-gpus", "1xH100:80GiB", "--cpus", "64", "--memory", "256GiB")...)
	nn.sub = start("submitter", nn.net.HomeB, home...)

	// AutoNAT finds both private after its boot delay; each then reserves
	// a slot on the relay, and the provider's next offer says so.
	for {
		id, err := nn.client(nn.sub).ID(ctx)
		relayed := err == nil && slices.ContainsFunc(id.Addrs, func(a string) bool { return strings.Contains(a, "/p2p-circuit") })
		reach := ""
		if nodes, err := nn.client(nn.sub).Nodes(ctx); err == nil {
			for _, n := range nodes {
				if n.PeerID == nn.prov.PeerID {
					reach = n.Reach
				}
			}
		}
		if relayed && reach == "relayed" {
			return nn
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the daemons behind NAT never became reachable: submitter has a relayed address %v, it sees the provider's reach as %q", relayed, reach)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (nn *natNet) client(n *cluster.Node) *api.Client { return api.NewClient(n.API) }

// peer asks n for its connection to id with the e31 command, which reaches
// the daemon in its namespace through its unix socket.
func (nn *natNet) peer(t *testing.T, n *cluster.Node, id string) api.Peer {
	t.Helper()
	out, err := exec.Command(bin.E31, "--api", n.API, "peers", "--json").Output()
	if err != nil {
		t.Fatalf("e31 peers: %v", err)
	}
	var peers []api.Peer
	if err := json.Unmarshal(out, &peers); err != nil {
		t.Fatalf("e31 peers --json: %v: %s", err, out)
	}
	for _, p := range peers {
		if p.PeerID == id {
			return p
		}
	}
	t.Fatalf("%s is not connected to %s: %s", n.Name, id, out)
	return api.Peer{}
}

// natInput writes an input of 4 MiB of random bytes, far more than a relay
// lets through (128 KiB per connection), and returns its folder and bytes.
func natInput(t *testing.T) (string, []byte) {
	t.Helper()
	return randomInput(t, "blob", 4<<20)
}

func natCheckOutput(t *testing.T, sub *api.Client, job string, want []byte) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "got")
	if _, err := sub.Get(context.Background(), job, api.GetRequest{Dir: out}); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(out, "out", "blob"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("output blob: %d bytes that differ from the %d staged", len(got), len(want))
	}
}

func natLogTail(t *testing.T, n *cluster.Node) {
	b, err := os.ReadFile(filepath.Join(n.Data, "e31d.log"))
	if err != nil {
		return
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	t.Logf("last lines of %s's log:\n%s", n.Name, strings.Join(lines[max(0, len(lines)-60):], "\n"))
}
