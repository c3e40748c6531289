package node

import (
	"context"
	"encoding/json"
	"time"

	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// serve installs a direct-stream handler and remembers it, so that a call to
// this node itself (a provider leasing to its own submitter) takes the same
// path without a dial: libp2p refuses to dial itself.
func (n *Node) serve(ctx context.Context, proto protocol.ID, timeout time.Duration, fn p2p.Handler) {
	n.handlers[proto] = fn
	p2p.Serve(ctx, n.host, proto, timeout, n.log, fn)
}

// call sends a request to a peer's handler of proto, or to this node's own.
func (n *Node) call(ctx context.Context, to peer.ID, proto protocol.ID, req, resp any) error {
	if to != n.self {
		return p2p.Call(ctx, n.host, to, proto, req, resp)
	}
	fn := n.handlers[proto]
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	out, err := fn(ctx, n.self, b)
	if err != nil {
		return &p2p.RemoteError{Msg: err.Error()}
	}
	if resp == nil {
		return nil
	}
	ob, err := json.Marshal(out)
	if err != nil {
		return err
	}
	return p2p.DecodeStrict(ob, resp)
}
