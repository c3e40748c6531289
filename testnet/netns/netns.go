package netns

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// Addresses of a Net. They are the same in every Net: each lives in its own
// namespaces, so two Nets never see each other.
const (
	// Internet is the public side's network.
	Internet = "10.31.0.0/24"
	// PubIP is the address of the public namespace, on the bridge.
	PubIP = "10.31.0.1"
	// RouterAIP and RouterBIP are the routers' wan addresses: what peers on
	// the internet see of HomeA and HomeB.
	RouterAIP = "10.31.0.2"
	RouterBIP = "10.31.0.3"
	// HomeAIP and HomeBIP are the hosts' addresses in their home networks.
	HomeAIP = "192.168.31.2"
	HomeBIP = "192.168.32.2"
)

// ErrUnavailable means this machine cannot build a Net (not root, or a
// command missing).
var ErrUnavailable = errors.New("network namespaces unavailable")

// Router is how RouterA treats what arrives on its wan side: the kinds of
// home router that NAT traversal meets. RouterB is always Dropping.
type Router int

const (
	// Dropping masquerades, keeping a host's source port where it can,
	// and silently drops new connections arriving on wan: the common home
	// router, which a hole punch gets through.
	Dropping Router = iota
	// Rejecting is Dropping, but answers what it refuses: a TCP reset
	// for a TCP segment, an ICMP port unreachable for anything else. A
	// punch packet that arrives before the router has seen its own host's
	// go out is answered, not dropped.
	Rejecting
	// Symmetric masquerades each connection to a random port (nftables'
	// masquerade random,fully-random): the port peers see differs with
	// each destination, so the one the relay observed is of no use to a
	// punch. Inbound new connections are dropped.
	Symmetric
	// Filtering drops everything from wan but PubIP, conntracked or not:
	// HomeA is reached only through Pub, and no punch gets through.
	Filtering
)

func (r Router) String() string {
	switch r {
	case Rejecting:
		return "rejecting"
	case Symmetric:
		return "symmetric"
	case Filtering:
		return "filtering"
	default:
		return "dropping"
	}
}

// Routers are the kinds of router, in order.
var Routers = []Router{Dropping, Rejecting, Symmetric, Filtering}

// Options configures New.
type Options struct {
	// RouterA is the kind of router in front of HomeA.
	RouterA Router
}

// Net is one built internet: the names of its five namespaces.
type Net struct {
	Pub, RouterA, RouterB, HomeA, HomeB string
}

// Available reports why a Net cannot be built here, wrapping
// ErrUnavailable, or nil when it can.
func Available() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: network namespaces need root", ErrUnavailable)
	}
	for _, tool := range []string{"ip", "nft", "nsenter"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%w: %s is not installed", ErrUnavailable, tool)
		}
	}
	return nil
}

// New builds a Net. On failure it removes whatever it had built; on success
// the caller must Close it, after stopping what it started inside.
func New(ctx context.Context, opts Options) (*Net, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	var suffix [3]byte
	if _, err := rand.Read(suffix[:]); err != nil {
		return nil, err
	}
	// Short names: the process ID tells a leftover's owner, the suffix
	// keeps two Nets of one process apart.
	p := fmt.Sprintf("e31n%d%s-", os.Getpid(), hex.EncodeToString(suffix[:]))
	n := &Net{Pub: p + "pub", RouterA: p + "ra", RouterB: p + "rb", HomeA: p + "ha", HomeB: p + "hb"}
	if err := n.build(ctx, opts); err != nil {
		if cerr := n.Close(); cerr != nil {
			err = errors.Join(err, cerr)
		}
		return nil, err
	}
	return n, nil
}

// Namespaces lists the Net's namespaces.
func (n *Net) Namespaces() []string { return []string{n.Pub, n.RouterA, n.RouterB, n.HomeA, n.HomeB} }

// Close deletes the namespaces, and with them every link and rule inside.
// Processes still running in one keep it alive until they exit, cut off.
func (n *Net) Close() error {
	var errs []error
	for _, name := range n.Namespaces() {
		if _, err := os.Stat("/run/netns/" + name); errors.Is(err, os.ErrNotExist) {
			continue
		}
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("ip netns del %s: %w: %s", name, err, out))
		}
	}
	return errors.Join(errs...)
}

// Command returns a command that runs name in namespace ns (one of the
// Net's), with only the network namespace changed.
func (n *Net) Command(ctx context.Context, ns, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "nsenter", append([]string{"--net=/run/netns/" + ns, "--", name}, args...)...)
}

// Exec runs a command in ns and returns its combined output; an error
// carries that output.
func (n *Net) Exec(ctx context.Context, ns, name string, args ...string) ([]byte, error) {
	out, err := n.Command(ctx, ns, name, args...).CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("%s %s in %s: %w: %s", name, strings.Join(args, " "), ns, err, out)
	}
	return out, nil
}

func (n *Net) build(ctx context.Context, opts Options) error {
	run := func(name string, args ...string) error {
		if out, err := exec.CommandContext(ctx, name, args...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, out)
		}
		return nil
	}
	for _, name := range n.Namespaces() {
		if err := run("ip", "netns", "add", name); err != nil {
			return err
		}
		if err := run("ip", "-n", name, "link", "set", "lo", "up"); err != nil {
			return err
		}
	}
	steps := [][]string{
		{"ip", "-n", n.Pub, "link", "add", "br0", "type", "bridge"},
		{"ip", "-n", n.Pub, "addr", "add", PubIP + "/24", "dev", "br0"},
		{"ip", "-n", n.Pub, "link", "set", "br0", "up"},
	}
	for _, s := range steps {
		if err := run(s[0], s[1:]...); err != nil {
			return err
		}
	}
	if err := n.home(ctx, run, n.RouterA, "ra", n.HomeA, RouterAIP, "192.168.31", opts.RouterA); err != nil {
		return err
	}
	return n.home(ctx, run, n.RouterB, "rb", n.HomeB, RouterBIP, "192.168.32", Dropping)
}

// home wires one home network: router's wan on the bridge, its lan to the
// host, a default route through the router, and the router's rules.
func (n *Net) home(ctx context.Context, run func(string, ...string) error, router, port, host, wanIP, lanNet string, kind Router) error {
	steps := [][]string{
		{"ip", "-n", router, "link", "add", "wan", "type", "veth", "peer", "name", port, "netns", n.Pub},
		{"ip", "-n", n.Pub, "link", "set", port, "master", "br0", "up"},
		{"ip", "-n", router, "addr", "add", wanIP + "/24", "dev", "wan"},
		{"ip", "-n", router, "link", "set", "wan", "up"},
		{"ip", "-n", router, "link", "add", "lan", "type", "veth", "peer", "name", "eth0", "netns", host},
		{"ip", "-n", router, "addr", "add", lanNet + ".1/24", "dev", "lan"},
		{"ip", "-n", router, "link", "set", "lan", "up"},
		{"ip", "-n", host, "addr", "add", lanNet + ".2/24", "dev", "eth0"},
		{"ip", "-n", host, "link", "set", "eth0", "up"},
		{"ip", "-n", host, "route", "add", "default", "via", lanNet + ".1"},
		{"nsenter", "--net=/run/netns/" + router, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1"},
	}
	for _, s := range steps {
		if err := run(s[0], s[1:]...); err != nil {
			return err
		}
	}
	cmd := exec.CommandContext(ctx, "nsenter", "--net=/run/netns/"+router, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(routerRules(kind))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nft in %s: %w: %s", router, err, out)
	}
	return nil
}

// routerRules are a home router's of the kind: masquerade out of wan,
// and refuse what arrives on wan unasked. The refusal happens before
// conntrack confirms the packet, so a punch packet that arrives early
// leaves no entry behind that would make the masquerade move the port of
// the punch going the other way. Filtering drops everything from wan but
// the public peer, conntracked or not: a plain "drop new inbound" rule is
// exactly what a punch does get through.
func routerRules(kind Router) string {
	masq, refuse, extra := "masquerade", "drop", ""
	switch kind {
	case Rejecting:
		// A reset for TCP, ICMP port unreachable for the rest: to what
		// arrives for the router itself (a port no mapping holds) and
		// to what it would forward.
		refuse = "meta l4proto tcp reject with tcp reset\n\t\tiifname \"wan\" ct state new reject"
	case Symmetric:
		masq = "masquerade random,fully-random"
	case Filtering:
		extra = "\n\t\tiifname \"wan\" ip saddr != " + PubIP + " drop"
	}
	return `table ip nat {
	chain postrouting {
		type nat hook postrouting priority srcnat; policy accept;
		oifname "wan" ` + masq + `
	}
}
table ip filter {
	chain input {
		type filter hook input priority filter; policy accept;
		iifname "wan" ct state new ` + refuse + `
	}
	chain forward {
		type filter hook forward priority filter; policy accept;
		iifname "wan" ct state new ` + refuse + extra + `
	}
}
`
}
