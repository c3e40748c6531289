//go:build !byzantine

package node

import (
	"context"
	"io"

	"github.com/e31network/e31/node/submitter"
	"github.com/ipfs/go-cid"
)

// rawContentBuilt: a default build cannot play a hostile submitter;
// Config.RawContent needs the byzantine tag (rawhooks_byzantine.go).
const rawContentBuilt = false

// submitterStore is the store the submitter works through: the node's own.
func (r rawHooks) submitterStore() submitter.Store { return r.store }

// submitterImages is the image library the submitter imports work.image
// with: the node's own.
func (r rawHooks) submitterImages() submitter.Images { return r.images }

// debugCAR is nil: a default build serves no POST /v1/debug/car.
func (rawHooks) debugCAR() func(ctx context.Context, car io.Reader) ([]cid.Cid, error) {
	return nil
}
