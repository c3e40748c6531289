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
// In each part a job is submitted as soon as the daemons have started,
// before anyone has learnt who is behind a NAT. The parts build their own
// internets and run side by side.
func TestNAT(t *testing.T) {
	requireSandbox(t)
	if testing.Short() && os.Getenv(netns.RequireEnv) == "" {
		t.Skip("builds network namespaces; skipped in -short mode")
	}
	t.Run("hole punched", func(t *testing.T) {
		t.Parallel()
		natHolePunched(t)
	})
	for _, r := range []netns.Router{netns.Rejecting, netns.Symmetric, netns.Filtering} {
		t.Run(r.String()+" router", func(t *testing.T) {
			t.Parallel()
			natAnyRouter(t, r)
		})
	}
	t.Run("relay carrying no data", func(t *testing.T) {
		t.Parallel()
		natRelayWithoutData(t)
	})
}

// natHolePunched: a job submitted behind NAT B the moment the daemons are
// up runs on the provider behind NAT A over a hole-punched connection, its
// input staged and its output returned, though the relay would carry the
// data; then a second job goes on to completion with the bootstrap peer
// (the relay) killed mid-run.
func natHolePunched(t *testing.T) {
	// The punch gets longer than its default 3s before the relay, which
	// carries data here, takes the data: on a loaded machine (CI runs this
	// beside the other routers' parts and packages) a punch through both
	// routers has taken over 20s, and this test is of the punched path.
	nn := startNATNet(t, netns.Dropping, true, "--punch-wait", "45s")
	sub := nn.client(nn.sub)

	in, want := natInput(t)
	d := decl("nat-copy", "cp /data/blob /out/blob; echo copied", 1, time.Minute)
	d.Data = []market.Input{{Source: in, Mount: "/data"}}
	j := submit(t, sub, d)
	j = waitJob(t, sub, j.ID, 90*time.Second, "release", released)
	if j.Outcome != "completed" || j.Provider != nn.prov.PeerID {
		t.Fatalf("job ended %s/%s on %s (reason %q), want completed on the provider %s", j.Outcome, j.Attribution, j.Provider, j.Reason, nn.prov.PeerID)
	}
	natCheckOutput(t, sub, j.ID, want)
	if n := natThroughRelay(t, nn.prov); n != 0 || j.DataRelay != "" {
		t.Fatalf("the provider fetched %d times through the relay, the final receipt names relay %q; want a hole-punched path", n, j.DataRelay)
	}

	// The submitter reaches the provider directly, at RouterA's wan
	// address: the only way there from HomeB is a hole through both
	// routers. e31 peers, as a user would ask.
	p := nn.peer(t, nn.sub, nn.prov.PeerID)
	if p.Path != "direct" {
		t.Fatalf("submitter reaches the provider %s (%s), want direct; connections %v", p.Path, p.PathReason, p.Addrs)
	}
	// Over QUIC: the UDP port RouterA gave the provider was learnt and
	// punched, and libp2p dials QUIC before TCP, so it is the one that
	// opens when both could.
	if !slices.ContainsFunc(p.Addrs, func(a string) bool {
		return strings.HasPrefix(a, "/ip4/"+netns.RouterAIP+"/udp/") && strings.HasSuffix(a, "/quic-v1")
	}) {
		t.Fatalf("no direct QUIC connection to the provider's router %s: %v", netns.RouterAIP, p.Addrs)
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

// natAnyRouter: behind a router of the kind, which a hole punch may not get
// through, a job submitted the moment the daemons are up still completes,
// its input staged and its output returned over the path it reports: a
// punched one, or a circuit through the relay, which carries data. Behind
// a filtering router, nothing but the relay can reach the provider.
func natAnyRouter(t *testing.T, router netns.Router) {
	nn := startNATNet(t, router, true)
	sub := nn.client(nn.sub)

	in, want := natInput(t)
	d := decl("nat-"+router.String(), "cp /data/blob /out/blob; echo copied", 1, time.Minute)
	d.Data = []market.Input{{Source: in, Mount: "/data"}}
	j := submit(t, sub, d)
	var path, via string
	j = waitJob(t, sub, j.ID, 120*time.Second, "release", func(j api.Job) bool {
		if j.Path != "" {
			path, via = j.Path, j.PathVia
		}
		return released(j)
	})
	if j.Outcome != "completed" || j.Provider != nn.prov.PeerID {
		t.Fatalf("job ended %s/%s on %s (reason %q), want completed on the provider %s", j.Outcome, j.Attribution, j.Provider, j.Reason, nn.prov.PeerID)
	}
	natCheckOutput(t, sub, j.ID, want)
	relayed := natThroughRelay(t, nn.prov)
	t.Logf("%s router: the job's data path %q (via %q); the provider fetched %d times through the relay", router, path, via, relayed)
	if path != "direct" && path != "relayed-data" {
		t.Fatalf("the job's status said its data path was %q, want direct or relayed-data", path)
	}
	if path == "relayed-data" && via != nn.boot.PeerID {
		t.Fatalf("data relayed through %q, want the bootstrap peer %s", via, nn.boot.PeerID)
	}
	// The final receipt, signed by both, says how the data moved.
	if want := map[bool]string{true: nn.boot.PeerID}[path == "relayed-data"]; j.DataRelay != want {
		t.Fatalf("the final receipt names relay %q, want %q (data path %s)", j.DataRelay, want, path)
	}
	if router == netns.Filtering && (path != "relayed-data" || relayed == 0) {
		t.Fatalf("behind a filtering router: path %q, %d fetches through the relay; want the relay to carry the data", path, relayed)
	}
}

// natRelayWithoutData: RouterA lets nothing in but the bootstrap peer, so
// no hole can be punched, and the relay carries a lease's messages but not
// its data. The lease is still made, over the relay, and staging then fails
// after waiting for a direct path, naming why.
func natRelayWithoutData(t *testing.T) {
	nn := startNATNet(t, netns.Filtering, false)
	sub := nn.client(nn.sub)

	in, _ := natInput(t)
	d := decl("nat-filtered", "cp /data/blob /out/blob", 1, time.Minute)
	d.Data = []market.Input{{Source: in, Mount: "/data"}}
	j := submit(t, sub, d)
	// The lease is signed by both sides, over the relay: the job reaches
	// rent.
	j = waitJob(t, sub, j.ID, 90*time.Second, "the lease", func(j api.Job) bool { return !stepAt(j, api.StepRent).IsZero() })
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
// An avoid lasts 10s rather than 5m: a provider a loaded machine makes
// slow to propose is avoided, as on any network, and the job waits for
// the avoid to lift, not past the test's deadlines.
func natArgs() []string {
	return []string{"--network", "nat", "--heartbeat", "1s", "--nat", "on", "--nat-public-net", netns.Internet, "--avoid-for", "10s"}
}

// startNATNet builds an internet with RouterA of the kind, starts its
// daemons (the bootstrap peer a relay that carries data, with relayData),
// and returns once they answer on their APIs: nobody has yet learnt who is
// behind a NAT, or taken a relay slot.
func startNATNet(t *testing.T, router netns.Router, relayData bool, homeArgs ...string) *natNet {
	t.Helper()
	nn := &natNet{net: netns.NewForTest(t, netns.Options{RouterA: router})}
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
	relay := []string{"--relay-service",
		"--listen", "/ip4/" + netns.PubIP + "/tcp/4001", "--listen", "/ip4/" + netns.PubIP + "/udp/4001/quic-v1"}
	if relayData {
		relay = append(relay, "--relay-data")
	}
	nn.boot = start("bootstrap", nn.net.Pub, relay...)
	home := append([]string{"--listen", "/ip4/0.0.0.0/tcp/4001", "--listen", "/ip4/0.0.0.0/udp/4001/quic-v1"}, homeArgs...)
	for _, a := range nn.boot.Addrs {
		home = append(home, "--bootstrap", a)
	}
	// A free terabyte, as a cluster's nodes count (cluster.Options.RealDiskByNode).
	nn.prov = start("provider", nn.net.HomeA, append(home, "--sim-gpus", "1xH100:80GiB", "--cpus", "64", "--memory", "256GiB", "--debug-disk-free", "1TiB")...)
	nn.sub = start("submitter", nn.net.HomeB, home...)
	return nn
}

// natThroughRelay is how many fetches n made through a relay, as its log
// tells them (its metrics listen on loopback inside its namespace).
func natThroughRelay(t *testing.T, n *cluster.Node) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(n.Data, "e31d.log"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "staging through a relay")
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
