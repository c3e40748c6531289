//go:build !byzantine

package node

import (
	"context"
	"io"

	"github.com/e31network/e31/node/submitter"
	"github.com/ipfs/go-cid"
)

// rawContentBuilt: a default build cannot play a hostile submitter;
// Config.RawContent needs the byzantine tag (rawcontent_on.go).
const rawContentBuilt = false

// submitterStore is the store the submitter works through: the node's own.
func (n *Node) submitterStore() submitter.Store { return n.store }

// submitterImages is the image library the submitter imports work.image
// with: the node's own.
func (n *Node) submitterImages() submitter.Images { return n.images }

// debugCAR is nil: a default build serves no POST /v1/debug/car.
func (n *Node) debugCAR() func(ctx context.Context, car io.Reader) ([]cid.Cid, error) {
	return nil
}
