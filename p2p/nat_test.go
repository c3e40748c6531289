package p2p

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/e31network/e31/testnet/netns"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
)

// TestNAT runs its hosts on the small internet of testnet/netns: a relay in
// Pub, a listener behind RouterA, a dialer behind RouterB.
const (
	relayIP          = netns.PubIP
	listenerRouterIP = netns.RouterAIP
	natPort          = "4001"
	helperEnv        = "E31_NAT_HELPER"
	// reportTag marks the helper's report lines on stdout, which the testing
	// package shares with them.
	reportTag = "E31NAT "
)

// natHelper is what a helper process is told to be, through helperEnv.
type natHelper struct {
	Role  string   // "relay", "listener" or "dialer"
	Relay []string // the relay's /p2p addresses (listener, dialer)
	// Target is the listener's peer ID (dialer).
	Target string
}

// natReport is what a helper prints once, on a line starting with reportTag.
type natReport struct {
	ID    string
	Addrs []string
	Path  string `json:",omitempty"`
	// Remote holds the remote address of each of the dialer's connections
	// to the listener.
	Remote []string         `json:",omitempty"`
	Echo   string           `json:",omitempty"`
	Punch  *HolePunchResult `json:",omitempty"`
	Error  string           `json:",omitempty"`
}

func TestNATHolePunchGoesDirect(t *testing.T) {
	rep := runNAT(t, netns.Dropping)
	if rep.Path != "direct" {
		t.Fatalf("stream went %s, want direct after the hole punch (punch: %+v)", rep.Path, rep.Punch)
	}
	// The only way from hb to ha is through ra's masquerade: a direct
	// connection is one to ra's wan address, punched through both routers.
	if !slices.ContainsFunc(rep.Remote, func(a string) bool {
		return strings.HasPrefix(a, "/ip4/"+listenerRouterIP+"/") && !strings.Contains(a, "/p2p-circuit")
	}) {
		t.Fatalf("no connection to the listener's router at %s: %v", listenerRouterIP, rep.Remote)
	}
}

func TestNATFilteringRouterKeepsRelay(t *testing.T) {
	rep := runNAT(t, netns.Filtering)
	if rep.Punch == nil || rep.Punch.Success {
		t.Fatalf("hole punch through a filtering router: %+v, want a failure", rep.Punch)
	}
	if rep.Path != "relayed" {
		t.Fatalf("stream went %s, want relayed", rep.Path)
	}
}

// runNAT builds the small internet, starts the relay in pub, a listener
// behind ra and a dialer behind rb, and returns the dialer's report on the
// echo call it made to the listener. With netns.Filtering, ra drops every packet from
// its wan side that does not come from the relay, conntracked or not: the
// firewall that hole punching cannot get through (a plain "drop new inbound"
// rule is exactly what a punch does get through).
func runNAT(t *testing.T, router netns.Router) natReport {
	if testing.Short() && os.Getenv(netns.RequireEnv) == "" {
		t.Skip("builds network namespaces; skipped in -short mode")
	}
	ns := netns.NewForTest(t, netns.Options{RouterA: router})

	relay := startHelper(t, ns, ns.Pub, natHelper{Role: "relay"})
	r := relay.report(t, 15*time.Second)
	if r.Error != "" {
		t.Fatalf("relay: %s", r.Error)
	}
	relayAddrs := p2pAddrs(r)

	listener := startHelper(t, ns, ns.HomeA, natHelper{Role: "listener", Relay: relayAddrs})
	l := listener.report(t, 20*time.Second)
	if l.Error != "" {
		t.Fatalf("listener: %s", l.Error)
	}
	if !slices.ContainsFunc(l.Addrs, func(a string) bool { return strings.Contains(a, "/p2p-circuit") }) {
		t.Fatalf("listener behind NAT advertises no relayed address: %v", l.Addrs)
	}

	dialer := startHelper(t, ns, ns.HomeB, natHelper{Role: "dialer", Relay: relayAddrs, Target: l.ID})
	d := dialer.report(t, 45*time.Second)
	if d.Error != "" {
		t.Fatalf("dialer: %s", d.Error)
	}
	if d.Echo != "echo through the NAT" {
		t.Fatalf("dialer got echo %q", d.Echo)
	}
	t.Logf("dialer %s: path %s, punch %+v", d.ID, d.Path, d.Punch)
	return d
}

func p2pAddrs(r natReport) []string {
	var out []string
	for _, a := range r.Addrs {
		out = append(out, a+"/p2p/"+r.ID)
	}
	return out
}

// helperProc is a copy of this test binary running one libp2p host in a
// namespace. Closing its stdin tells it to stop.
type helperProc struct {
	name    string
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	reports chan natReport
	stderr  *lockedBuffer
}

type lockedBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func startHelper(t *testing.T, n *netns.Net, ns string, h natHelper) *helperProc {
	t.Helper()
	cfg, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	cmd := n.Command(context.Background(), ns, os.Args[0], "-test.run=^TestNATHelperProcess$", "-test.timeout=2m")
	cmd.Env = append(os.Environ(), helperEnv+"="+string(cfg))
	p := &helperProc{name: h.Role, cmd: cmd, reports: make(chan natReport, 1), stderr: &lockedBuffer{}}
	cmd.Stderr = p.stderr
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s helper: %v", h.Role, err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line, ok := strings.CutPrefix(sc.Text(), reportTag)
			if !ok {
				continue
			}
			var r natReport
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				r.Error = "unreadable report: " + line
			}
			p.reports <- r
		}
		close(p.reports)
	}()
	t.Cleanup(func() {
		p.stdin.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("%s helper stderr:\n%s", p.name, p.stderr.String())
		}
	})
	return p
}

func (p *helperProc) report(t *testing.T, d time.Duration) natReport {
	t.Helper()
	select {
	case r, ok := <-p.reports:
		if !ok {
			t.Fatalf("%s helper exited without a report; stderr:\n%s", p.name, p.stderr.String())
		}
		return r
	case <-time.After(d):
		t.Fatalf("no report from the %s helper within %v; stderr:\n%s", p.name, d, p.stderr.String())
	}
	return natReport{}
}

// TestNATHelperProcess is not a test: runNAT starts this binary inside a
// namespace with helperEnv set, and this function runs one host there.
func TestNATHelperProcess(t *testing.T) {
	raw := os.Getenv(helperEnv)
	if raw == "" {
		t.Skip("runs only as TestNAT's helper process")
	}
	var cfg natHelper
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		t.Fatal(err)
	}
	rep := runHelper(cfg)
	b, _ := json.Marshal(rep)
	fmt.Printf("%s%s\n", reportTag, b)
	if cfg.Role != "dialer" {
		// Stay up, serving, until the test closes stdin.
		io.Copy(io.Discard, os.Stdin)
	}
	os.Exit(0)
}

// runHelper runs the host of one role and returns its report. The hosts it
// starts live until the process exits.
func runHelper(cfg natHelper) natReport {
	// libp2p hole-punches only towards addresses it counts as public, and it
	// counts all of 10.0.0.0/8 as private. The test's "internet" 10.31.0.0/24
	// exists only inside its namespaces, so this process, which runs inside
	// them, counts 10/8 as public instead; 192.168/16 stays private, and the
	// home networks with it.
	manet.Private4 = slices.DeleteFunc(slices.Clone(manet.Private4), func(n *net.IPNet) bool {
		return n.Contains(net.ParseIP(relayIP))
	})

	ctx := context.Background()
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		return natReport{Error: err.Error()}
	}
	var relays []peer.AddrInfo
	if len(cfg.Relay) > 0 {
		if relays, err = ParseBootstrap(cfg.Relay); err != nil {
			return natReport{Error: err.Error()}
		}
	}
	listen := []string{"/ip4/0.0.0.0/tcp/" + natPort, "/ip4/0.0.0.0/udp/" + natPort + "/quic-v1"}
	punches := make(chan HolePunchResult, 8)
	var reach Reachability
	switch cfg.Role {
	case "relay":
		// Only the bridge address: the relay's loopback must not end up in
		// the addresses the others are given.
		listen = []string{"/ip4/" + relayIP + "/tcp/" + natPort, "/ip4/" + relayIP + "/udp/" + natPort + "/quic-v1"}
		// A bootstrap peer told to be a relay: public by configuration.
		reach = Reachability{Force: ReachPublic, RelayService: true}
	case "listener", "dialer":
		// What AutoNAT would learn after its boot delay, forced so the test
		// does not wait for it.
		reach = Reachability{Force: ReachPrivate, RelayClient: true, StaticRelays: relays,
			HolePunch: true, HolePunchTimeout: 3 * time.Second,
			OnHolePunch: func(r HolePunchResult) {
				select {
				case punches <- r:
				default:
				}
			}}
	default:
		return natReport{Error: "unknown role " + cfg.Role}
	}
	h, err := NewHost(HostConfig{Key: key, Listen: listen, Reachability: reach})
	if err != nil {
		return natReport{Error: err.Error()}
	}
	rep := func() natReport {
		r := natReport{ID: h.ID().String()}
		for _, a := range h.Addrs() {
			r.Addrs = append(r.Addrs, a.String())
		}
		return r
	}
	deadline := func(d time.Duration, what string, cond func() bool) error {
		end := time.Now().Add(d)
		for !cond() {
			if time.Now().After(end) {
				return fmt.Errorf("timed out waiting for %s", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
		return nil
	}
	speaks := func(proto string) func() bool {
		return func() bool { return slices.Contains(h.Mux().Protocols(), protocol.ID(proto)) }
	}

	switch cfg.Role {
	case "relay":
		// Serve only once the relay service is up: a client refused a
		// reservation backs off for an hour.
		if err := deadline(10*time.Second, "the relay service", speaks("/libp2p/circuit/relay/0.2.0/hop")); err != nil {
			return natReport{Error: err.Error()}
		}
		return rep()

	case "listener":
		serveEcho(ctx, h)
		// Ready once it holds a slot on the relay and can answer a hole
		// punch (DCUtR starts once identify has told it a public address).
		if err := deadline(15*time.Second, "a relayed address", func() bool {
			return slices.ContainsFunc(h.Addrs(), IsRelayed)
		}); err != nil {
			return natReport{Error: err.Error(), Addrs: rep().Addrs}
		}
		if err := deadline(15*time.Second, "hole punching to start", speaks("/libp2p/dcutr")); err != nil {
			return natReport{Error: err.Error()}
		}
		return rep()

	default: // dialer
		return dial(ctx, h, cfg, relays, punches, deadline, speaks)
	}
}

func dial(ctx context.Context, h host.Host, cfg natHelper, relays []peer.AddrInfo, punches <-chan HolePunchResult,
	deadline func(time.Duration, string, func() bool) error, speaks func(string) func() bool) natReport {
	fail := func(err error) natReport { return natReport{ID: h.ID().String(), Error: err.Error()} }
	target, err := peer.Decode(cfg.Target)
	if err != nil {
		return fail(err)
	}
	if err := h.Connect(ctx, relays[0]); err != nil {
		return fail(fmt.Errorf("connect to relay: %w", err))
	}
	if err := deadline(15*time.Second, "hole punching to start", speaks("/libp2p/dcutr")); err != nil {
		return fail(err)
	}
	circuit, err := ma.NewMultiaddr("/p2p/" + relays[0].ID.String() + "/p2p-circuit")
	if err != nil {
		return fail(err)
	}
	var addrs []ma.Multiaddr
	for _, a := range relays[0].Addrs {
		addrs = append(addrs, a.Encapsulate(circuit))
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err = h.Connect(cctx, peer.AddrInfo{ID: target, Addrs: addrs})
	cancel()
	if err != nil {
		return fail(fmt.Errorf("connect through relay: %w", err))
	}
	// The listener saw a relayed connection arrive and starts the punch; wait
	// for its outcome, or for the direct connection it makes.
	var punch *HolePunchResult
	end := time.After(30 * time.Second)
wait:
	for path, _ := PeerPath(h, target); path != PathDirect; path, _ = PeerPath(h, target) {
		select {
		case r := <-punches:
			punch = &r
			if !r.Success {
				break wait
			}
		case <-end:
			return fail(fmt.Errorf("neither a direct connection nor a failed hole punch within 30 s"))
		case <-time.After(20 * time.Millisecond):
		}
	}
	if punch == nil {
		select {
		case r := <-punches:
			punch = &r
		default:
		}
	}
	var echo string
	if err := Call(ctx, h, target, echoProto, "through the NAT", &echo); err != nil {
		return fail(fmt.Errorf("call listener: %w", err))
	}
	path, _ := PeerPath(h, target)
	r := natReport{ID: h.ID().String(), Echo: echo, Punch: punch, Path: path.String()}
	for _, c := range h.Network().ConnsToPeer(target) {
		r.Remote = append(r.Remote, c.RemoteMultiaddr().String())
	}
	return r
}
