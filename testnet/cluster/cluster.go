package cluster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/e31network/e31/node"
	"github.com/e31network/e31/node/api"
)

// Options configures Start.
type Options struct {
	// N is the number of nodes.
	N int
	// GPUs per node, all of one model; ignored when SimGPUs is set.
	GPUs int
	// SimGPUs, when set, is the --sim-gpus spec of every node.
	SimGPUs string
	// SimGPUsByNode, when set, gives node i the spec SimGPUsByNode[i]
	// instead ("" for none: a node that only submits).
	SimGPUsByNode []string
	// Dir holds the nodes' data dirs, logs and nodes.json.
	Dir string
	// Bin holds the built commands; see Build.
	Bin Binaries
	// Heartbeat of every node; default 1s.
	Heartbeat time.Duration
	// DigestEvery is every node's e31d --digest-every; 0: the daemon's
	// default (a minute).
	DigestEvery time.Duration
	// Network name; default "testnet".
	Network string
	// Shards splits the network's market (e31d --shards); 0 or 1: one.
	// Each node's shard is the one its peer ID picks unless ArgsByNode
	// names one (--shard).
	Shards int
	// Market splits the network's market another way (e31d --market):
	// "classes", by resource class, each node in its GPUs' class market.
	Market string
	// ClassShards splits classes into subshards (e31d --class-shards),
	// with Market "classes".
	ClassShards string
	// Args are extra e31d flags for every node.
	Args []string
	// Misbehave, when set, gives node i the --misbehave list Misbehave[i]
	// ("" or absent: an honest node). Such nodes run Bin.E31dByzantine.
	Misbehave []string
	// ArgsByNode, when set, adds ArgsByNode[i] to node i's flags, after
	// Args.
	ArgsByNode [][]string
	// Metrics gives every node a Prometheus endpoint on a loopback port
	// (Node.Metrics).
	Metrics bool
	// Detach starts the nodes in their own session so that they outlive the
	// process that started them (the testnet command); tests leave it off.
	Detach bool
	// RealDiskByNode, when set, has node i measure its data dir's
	// filesystem as it is where RealDiskByNode[i] (a test that mounts a
	// small one there first). Every other node counts it as a free
	// terabyte (e31d --debug-disk-free): the nodes of a test network share
	// one filesystem of whatever size the machine has, and their jobs ask
	// for disks (10 GiB by default) they never fill, so what they are
	// granted must not depend on it.
	RealDiskByNode []bool
	// TokenFile, when set, names a file whose API token every node is
	// given (copied into its data dir before it starts, where e31d keeps
	// it), so that one token reaches them all: a test's e31 commands
	// find it in $E31_API_TOKEN_FILE. Empty: each node makes its own.
	TokenFile string
}

// Node is one started node, as written to nodes.json.
type Node struct {
	Name   string `json:"name"`
	PeerID string `json:"peer_id"`
	API    string `json:"api"`
	Data   string `json:"data"`
	PID    int    `json:"pid"`
	// Addrs are the node's libp2p addresses.
	Addrs []string `json:"addrs"`
	// Metrics is the node's Prometheus address, when asked for.
	Metrics string `json:"metrics,omitempty"`
	// TokenFile holds the token the node's API asks of every request
	// (e31 --api-token-file, E31_API_TOKEN_FILE).
	TokenFile string `json:"api_token_file"`
	// Network is the network the node is on (e31d --network); Join the
	// e31d flags that join it through this node: its network, its shard
	// count where the network is split, and this node as the bootstrap
	// peer. A daemon started without them is on another network, and
	// never meets these nodes in a market.
	Network string `json:"network,omitempty"`
	Join    string `json:"join,omitempty"`

	args []string
	// e31d is the daemon binary this node runs; empty: Options.Bin.E31d.
	e31d string
	// prefix runs e31d, e.g. nsenter into a network namespace; empty:
	// e31d itself.
	prefix []string
	cmd    *exec.Cmd
	done   chan struct{}
}

// Cluster is a started set of nodes.
type Cluster struct {
	opts  Options
	Nodes []*Node
}

// NodesFile is the name of the file listing a cluster's nodes.
const NodesFile = "nodes.json"

// Start launches opts.N nodes, node 0 first as the others' bootstrap peer,
// and waits until each has written its run file.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.N < 1 {
		return nil, errors.New("a cluster needs at least one node")
	}
	if opts.Heartbeat == 0 {
		opts.Heartbeat = time.Second
	}
	if opts.Network == "" {
		opts.Network = "testnet"
	}
	if opts.SimGPUs == "" && opts.GPUs > 0 {
		opts.SimGPUs = fmt.Sprintf("%dxH100:80GiB", opts.GPUs)
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, err
	}
	opts.Dir = dir
	c := &Cluster{opts: opts}
	for i := 0; i < opts.N; i++ {
		var boot []string
		if i > 0 {
			boot = c.Nodes[0].Addrs
		}
		n, err := c.startNode(ctx, i, boot)
		if err != nil {
			c.Stop()
			return nil, err
		}
		c.Nodes = append(c.Nodes, n)
	}
	return c, c.WriteNodesFile()
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func (c *Cluster) startNode(ctx context.Context, i int, boot []string) (*Node, error) {
	name := fmt.Sprintf("node%d", i)
	data := filepath.Join(c.opts.Dir, name)
	if err := os.MkdirAll(data, 0o700); err != nil {
		return nil, err
	}
	if c.opts.TokenFile != "" {
		tok, err := api.ReadToken(c.opts.TokenFile)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(data, api.TokenFile), []byte(tok+"\n"), 0o600); err != nil {
			return nil, err
		}
	}
	args := []string{
		"--data", data,
		// TCP only: a killed node's TCP connections close at once, while a
		// QUIC connection to it looks alive until it idles out (30 s),
		// which would hide a restarted node from its peers that long.
		"--listen", "/ip4/127.0.0.1/tcp/0",
		// The daemon picks the port and writes it to its run file; a
		// port picked here could be taken before the daemon binds it.
		"--api", "127.0.0.1:0",
		"--network", c.opts.Network,
		"--heartbeat", c.opts.Heartbeat.String(),
		// Simulated GPUs come with room for their jobs' CPUs and memory,
		// whatever the size of the machine the testnet runs on.
		"--cpus", "64",
		"--memory", "256GiB",
		"--debug-partition",
	}
	if c.opts.DigestEvery > 0 {
		args = append(args, "--digest-every", c.opts.DigestEvery.String())
	}
	if i >= len(c.opts.RealDiskByNode) || !c.opts.RealDiskByNode[i] {
		args = append(args, "--debug-disk-free", "1TiB")
	}
	if spec := c.simGPUs(i); spec != "" {
		args = append(args, "--sim-gpus", spec)
	}
	if c.opts.Shards > 1 {
		args = append(args, "--shards", strconv.Itoa(c.opts.Shards))
	}
	if c.opts.Market != "" {
		args = append(args, "--market", c.opts.Market)
	}
	if c.opts.ClassShards != "" {
		args = append(args, "--class-shards", c.opts.ClassShards)
	}
	for _, b := range boot {
		args = append(args, "--bootstrap", b)
	}
	args = append(args, c.opts.Args...)
	if i < len(c.opts.ArgsByNode) {
		args = append(args, c.opts.ArgsByNode[i]...)
	}
	n := &Node{Name: name, Data: data, TokenFile: filepath.Join(data, api.TokenFile), args: args}
	if i < len(c.opts.Misbehave) && c.opts.Misbehave[i] != "" {
		if c.opts.Bin.E31dByzantine == "" {
			return nil, fmt.Errorf("%s misbehaves, but no byzantine e31d was built (BuildByzantine)", name)
		}
		n.e31d = c.opts.Bin.E31dByzantine
		n.args = append(n.args, "--misbehave", c.opts.Misbehave[i])
	}
	base := n.args
	for try := 1; ; try++ {
		if c.opts.Metrics {
			// The metrics port is picked here, and may be taken by
			// another process before the daemon binds it: then the
			// daemon says so and exits, and another port is tried.
			mp, err := freePort()
			if err != nil {
				return nil, err
			}
			n.Metrics = "127.0.0.1:" + strconv.Itoa(mp)
			n.args = append(slices.Clone(base), "--metrics", n.Metrics)
		}
		err := c.launch(ctx, n)
		if err == nil {
			// A restart keeps the API port the daemon picked.
			n.args[slices.Index(n.args, "--api")+1] = n.API
			return n, nil
		}
		if try == 3 || !c.opts.Metrics || !portTaken(n) {
			return n, err
		}
	}
}

// portTaken reports whether a node's last start failed because an address
// it was to listen on was in use.
func portTaken(n *Node) bool {
	b, err := os.ReadFile(filepath.Join(n.Data, "e31d.log"))
	return err == nil && bytes.Contains(b, []byte("address already in use"))
}

// launch starts (or restarts) a node's process and waits for its run file.
func (c *Cluster) launch(ctx context.Context, n *Node) error {
	bin := c.opts.Bin.E31d
	if n.e31d != "" {
		bin = n.e31d
	}
	if err := launch(ctx, bin, c.opts.Detach, n); err != nil {
		return err
	}
	n.Network, n.Join = c.opts.Network, c.joinFlags(n)
	return nil
}

func launch(ctx context.Context, e31d string, detach bool, n *Node) error {
	_ = os.Remove(filepath.Join(n.Data, node.RunFile))
	logf, err := os.OpenFile(filepath.Join(n.Data, "e31d.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	argv := append(append(slices.Clone(n.prefix), e31d), n.args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: detach}
	if !detach {
		// A test that dies must not leave daemons behind.
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", n.Name, err)
	}
	logf.Close()
	n.cmd = cmd
	n.PID = cmd.Process.Pid
	n.done = make(chan struct{})
	go func(done chan struct{}) {
		_ = cmd.Wait()
		close(done)
	}(n.done)

	deadline := time.Now().Add(60 * time.Second)
	for {
		b, err := os.ReadFile(filepath.Join(n.Data, node.RunFile))
		if err == nil {
			var ri node.RunInfo
			if json.Unmarshal(b, &ri) == nil && ri.PID == n.PID {
				n.PeerID, n.API, n.Addrs = ri.PeerID, ri.API, ri.Addrs
				return nil
			}
		}
		select {
		case <-n.done:
			return fmt.Errorf("%s exited during start; see %s", n.Name, filepath.Join(n.Data, "e31d.log"))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not become ready in 60s; see %s", n.Name, filepath.Join(n.Data, "e31d.log"))
		}
	}
}

func (c *Cluster) simGPUs(i int) string {
	if c.opts.SimGPUsByNode != nil {
		if i < len(c.opts.SimGPUsByNode) {
			return c.opts.SimGPUsByNode[i]
		}
		return ""
	}
	return c.opts.SimGPUs
}

// Client returns an API client for node i.
func (c *Cluster) Client(i int) *api.Client { return c.Nodes[i].Client() }

// Addrs is every node's listen addresses, node by node.
func (c *Cluster) Addrs() []string {
	var addrs []string
	for _, n := range c.Nodes {
		addrs = append(addrs, n.Addrs...)
	}
	return addrs
}

// Client returns an API client for the node, with its token. A token it
// cannot read is not sent, and the node's refusal says so.
func (n *Node) Client() *api.Client {
	tok, _ := api.ReadToken(n.TokenFile)
	return api.NewClient(n.API, api.WithToken(tok))
}

// joinFlags are the e31d flags that join the cluster's network through n:
// "--network NAME [--shards N] [--market M] [--class-shards S]
// --bootstrap ADDR".
func (c *Cluster) joinFlags(n *Node) string {
	flags := "--network " + c.opts.Network
	if c.opts.Shards > 1 {
		flags += " --shards " + strconv.Itoa(c.opts.Shards)
	}
	if c.opts.Market != "" {
		flags += " --market " + c.opts.Market
	}
	if c.opts.ClassShards != "" {
		flags += " --class-shards " + c.opts.ClassShards
	}
	if len(n.Addrs) > 0 {
		flags += " --bootstrap " + n.Addrs[0]
	}
	return flags
}

// WriteNodesFile writes Dir/nodes.json.
func (c *Cluster) WriteNodesFile() error {
	b, err := json.MarshalIndent(c.Nodes, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(c.opts.Dir, NodesFile), append(b, '\n'), 0o644)
}

// WaitConverged waits until every live node's view lists every live node
// that has GPUs, with all of them.
func (c *Cluster) WaitConverged(ctx context.Context) error {
	// A node sees the providers of its own shard only.
	live := map[string][]*Node{}
	want := map[string]map[string]int{}
	var shards []string
	for i, n := range c.Nodes {
		if !n.Alive() {
			continue
		}
		id, err := n.Client().ID(ctx)
		if err != nil {
			return fmt.Errorf("%s: %w", n.Name, err)
		}
		if _, ok := want[id.Shard]; !ok {
			want[id.Shard] = map[string]int{}
			shards = append(shards, id.Shard)
		}
		live[id.Shard] = append(live[id.Shard], n)
		if g := countGPUs(c.simGPUs(i)); g > 0 {
			want[id.Shard][n.PeerID] = g
		}
	}
	for _, s := range shards {
		if err := waitViews(ctx, live[s], want[s]); err != nil {
			if len(shards) > 1 {
				return fmt.Errorf("shard %s: %w", s, err)
			}
			return err
		}
	}
	return nil
}

// countGPUs counts the GPUs of a --sim-gpus spec.
func countGPUs(spec string) int {
	total := 0
	for _, part := range strings.Split(spec, ",") {
		k, _, ok := strings.Cut(part, "x")
		if v, err := strconv.Atoi(k); ok && err == nil {
			total += v
		}
	}
	return total
}

// waitViews waits until every node in nodes sees exactly the providers of
// want, each with its number of GPUs.
func waitViews(ctx context.Context, nodes []*Node, want map[string]int) error {
	for {
		ok := true
		var last string
	check:
		for _, n := range nodes {
			got, err := n.Client().Nodes(ctx)
			if err != nil {
				ok, last = false, err.Error()
				break
			}
			if len(got) != len(want) {
				ok, last = false, fmt.Sprintf("%s sees %d providers, want %d", n.Name, len(got), len(want))
				break
			}
			for _, p := range got {
				if g, known := want[p.PeerID]; !known || len(p.GPUs) != g {
					ok, last = false, fmt.Sprintf("%s sees %s with %d GPUs, want %d", n.Name, p.PeerID, len(p.GPUs), g)
					break check
				}
			}
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("views did not converge: %s: %w", last, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Panics returns, for every node, the lines of its log (Data/e31d.log)
// that show a panic, each prefixed with the node's name: Go's report of an
// unrecovered panic or a fatal runtime error ("panic: ", "fatal error: "
// at the start of a line), and the daemon's "panic recovered" record of
// one it survived. A daemon that panicked has a bug even if it went on,
// so tests fail on any. A log that cannot be read is reported too.
func (c *Cluster) Panics() []string {
	var out []string
	for _, n := range c.Nodes {
		lines, err := panicLines(filepath.Join(n.Data, "e31d.log"))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			out = append(out, fmt.Sprintf("%s: %v", n.Name, err))
		}
		for _, l := range lines {
			out = append(out, n.Name+": "+l)
		}
	}
	return out
}

// panicLines returns the lines of the log at path that show a panic.
func panicLines(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	// Line by line without a cap on length: a recovered panic's record
	// holds its whole stack on one line.
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadString('\n')
		if isPanicLine(line) {
			out = append(out, strings.TrimRight(line, "\n"))
		}
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("read %s: %w", path, err)
		}
	}
}

// isPanicLine reports whether a log line shows a panic: the runtime's
// report of one that ended the process, or the daemon's record, in its
// text or JSON log format, of one it recovered.
func isPanicLine(line string) bool {
	return strings.HasPrefix(line, "panic: ") || strings.HasPrefix(line, "fatal error: ") ||
		strings.Contains(line, `msg="panic recovered"`) || strings.Contains(line, `"msg":"panic recovered"`)
}

// Alive reports whether the node's process is running.
func (n *Node) Alive() bool {
	if n.done == nil {
		return false
	}
	select {
	case <-n.done:
		return false
	default:
		return true
	}
}

// Kill sends SIGKILL to node i and waits for it to die.
func (c *Cluster) Kill(i int) error {
	return c.Nodes[i].Kill()
}

// Kill sends SIGKILL to the node and waits for it to die.
func (n *Node) Kill() error {
	if !n.Alive() {
		return nil
	}
	if err := n.cmd.Process.Kill(); err != nil {
		return err
	}
	<-n.done
	return nil
}

// Restart starts node i again on the same data dir and flags.
func (c *Cluster) Restart(ctx context.Context, i int) error {
	if err := c.Kill(i); err != nil {
		return err
	}
	if err := c.launch(ctx, c.Nodes[i]); err != nil {
		return err
	}
	return c.WriteNodesFile()
}

// Stop ends every node: SIGTERM, then SIGKILL for any still running after
// ten seconds.
func (c *Cluster) Stop() {
	for _, n := range c.Nodes {
		if n.Alive() {
			_ = n.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	// One deadline for all: a channel from time.After fires once, so each
	// node waits on its own timer for what is left of it.
	deadline := time.Now().Add(10 * time.Second)
	for _, n := range c.Nodes {
		if n.done == nil {
			continue
		}
		select {
		case <-n.done:
		case <-time.After(time.Until(deadline)):
			_ = n.cmd.Process.Kill()
			<-n.done
		}
	}
	for _, n := range c.Nodes {
		// What a node killed during a job left (its restart would have
		// swept it) is partly outside the cluster's directory and
		// outlives it.
		_ = SweepLeftovers(n.Data)
	}
}
