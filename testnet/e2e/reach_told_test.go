package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/cmd/e31d/doctor"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/testnet/cluster"
	"github.com/e31network/e31/testnet/netns"
	"github.com/e31network/e31/testnet/poll"
)

// TestReachToldBehindNAT: a provider behind a home router whose only
// bootstrap peer serves as no relay can be reached by no peer, and is told
// so where its owner looks: once in its log, with why and the fix; in
// e31 id (and --json); by e31d doctor, run beside it with the same flags;
// and by e31 doctor, which asks the daemon.
func TestReachToldBehindNAT(t *testing.T) {
	requireSandbox(t)
	if testing.Short() && os.Getenv(netns.RequireEnv) == "" {
		t.Skip("builds network namespaces; skipped in -short mode")
	}
	nn := netns.NewForTest(t, netns.Options{RouterA: netns.Dropping})
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	inNS := func(ns string) []string { return []string{"nsenter", "--net=/run/netns/" + ns, "--"} }
	start := func(name, ns string, args ...string) *cluster.Node {
		t.Helper()
		n, err := cluster.StartNode(ctx, bin, name, filepath.Join(dir, name), inNS(ns), append(natArgs(), args...))
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
	// The bootstrap peer is on the internet but runs no --relay-service.
	boot := start("bootstrap", nn.Pub, "--listen", "/ip4/"+netns.PubIP+"/tcp/4001", "--listen", "/ip4/"+netns.PubIP+"/udp/4001/quic-v1")
	home := []string{"--listen", "/ip4/0.0.0.0/tcp/4001", "--listen", "/ip4/0.0.0.0/udp/4001/quic-v1"}
	for _, a := range boot.Addrs {
		home = append(home, "--bootstrap", a)
	}
	prov := start("provider", nn.HomeA, append(home, "--sim-gpus", "1xH100:80GiB", "--cpus", "64", "--memory", "256GiB", "--debug-disk-free", "1TiB")...)

	const told = "no peer can reach this node: it gets no work"
	why := "none of the 1 bootstrap peers it is connected to serves as a relay"
	logged := func() []string {
		b, err := os.ReadFile(filepath.Join(prov.Data, "e31d.log"))
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, told) {
				lines = append(lines, l)
			}
		}
		return lines
	}
	start0 := time.Now()
	poll.Until(t, "the provider's log saying it is unreachable", 90*time.Second, func() bool { return len(logged()) > 0 })
	t.Logf("told in the log after %.1fs: %s", time.Since(start0).Seconds(), logged()[0])
	if l := logged()[0]; !strings.Contains(l, why) || !strings.Contains(l, "forward tcp/4001 and udp/4001") || !strings.Contains(l, "--relay-service") {
		t.Errorf("the log line names neither why nor the fix: %s", l)
	}

	out, err := exec.Command(bin.E31, "--api", prov.API, "id", "--json").Output()
	if err != nil {
		t.Fatalf("e31 id --json: %v", err)
	}
	var id api.ID
	if err := json.Unmarshal(out, &id); err != nil {
		t.Fatalf("e31 id --json: %v: %s", err, out)
	}
	if r := id.Reachability; r == nil || r.State != "unreachable" || !strings.Contains(r.Why, why) || r.Fix == "" || !strings.HasPrefix(r.Line, told) {
		t.Errorf("e31 id --json: reachability %+v", id.Reachability)
	}
	text, err := exec.Command(bin.E31, "--api", prov.API, "id").Output()
	if err != nil || !strings.Contains(string(text), "reach     unreachable: "+told) {
		t.Errorf("e31 id: %v\n%s", err, text)
	}

	// The doctor, beside the running daemon (whose ports it leaves to it),
	// with the daemon's flags.
	args := append(inNS(nn.HomeA), bin.E31d, "doctor", "--json", "--data", filepath.Join(dir, "doctor"),
		"--nat", "on", "--nat-public-net", netns.Internet)
	args = append(args, home...)
	doc := exec.Command(args[0], args[1:]...)
	var stderr bytes.Buffer
	doc.Stderr = &stderr
	out, err = doc.Output()
	if ee := (*exec.ExitError)(nil); err != nil && !errors.As(err, &ee) {
		t.Fatalf("e31d doctor: %v", err)
	}
	var rep doctor.Report
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("e31d doctor --json: %v: %s%s", err, out, stderr.String())
	}
	var check *doctor.Result
	for i := range rep.Checks {
		if rep.Checks[i].Name == "reachability" {
			check = &rep.Checks[i]
		}
	}
	if check == nil || check.Status != doctor.Fail || !strings.Contains(check.Detail, told) || !strings.Contains(check.Detail, why) || check.Fix == "" {
		t.Errorf("e31d doctor's reachability check: %+v", check)
	}
	if err == nil {
		t.Errorf("e31d doctor exited 0 with a failed check")
	}

	// e31 doctor asks the running daemon, which says what it knows.
	out, err = exec.Command(bin.E31, "--api", prov.API, "doctor", "--json").Output()
	if ee := (*exec.ExitError)(nil); err != nil && !errors.As(err, &ee) {
		t.Fatalf("e31 doctor: %v", err)
	}
	rep = doctor.Report{}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("e31 doctor --json: %v: %s", err, out)
	}
	if last := rep.Checks[len(rep.Checks)-1]; last.Name != "reachability" || last.Status != doctor.Fail ||
		!strings.Contains(last.Detail, why) || !strings.Contains(last.Detail, "this running daemon") || last.Fix == "" {
		t.Errorf("e31 doctor's last check %+v, want the daemon's reachability, failed", last)
	}

	// Told once: nothing changed meanwhile.
	if n := len(logged()); n != 1 {
		t.Errorf("told %d times in the log, want once", n)
	}
}
