package cluster

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/e31network/e31/node/api"
)

// StartNode starts one node outside any Cluster, for a test that lays out
// its own network: e31d runs with --data data and exactly args besides,
// under prefix when one is given (nsenter into a network namespace, say),
// so nothing about its addresses is chosen for it. It returns once the node
// is ready; it dies with the process that started it.
func StartNode(ctx context.Context, bin Binaries, name, data string, prefix, args []string) (*Node, error) {
	if err := os.MkdirAll(data, 0o700); err != nil {
		return nil, err
	}
	n := &Node{Name: name, Data: data, TokenFile: filepath.Join(data, api.TokenFile), prefix: prefix, args: append([]string{"--data", data}, args...)}
	if err := launch(ctx, bin.E31d, false, n); err != nil {
		if n.Alive() {
			_ = n.Kill()
		}
		return nil, err
	}
	return n, nil
}

// Stop ends the node: SIGTERM, then SIGKILL if it still runs after ten
// seconds.
func (n *Node) Stop() { n.StopWithin(10 * time.Second) }

// StopWithin ends the node as systemd stops a service: SIGTERM, which
// drains it, then SIGKILL if it still runs after d. It reports whether the
// node stopped by itself.
func (n *Node) StopWithin(d time.Duration) bool {
	if !n.Alive() {
		return true
	}
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.done:
		return true
	case <-time.After(d):
		_ = n.Kill()
		return false
	}
}
