package rogue

import (
	"bytes"
	"context"

	"github.com/e31network/e31/market"
)

// EscapeModel is a GPU model that is a terminal escape: OSC 52, which
// writes "evil" to the clipboard of whoever prints it raw, ended by BEL.
const EscapeModel = "H100\x1b]52;c;ZXZpbA==\x07"

// OfferEscapes publishes an offer of one GPU whose model is EscapeModel,
// every heartbeat, for an honest node to print. The offer drains: a
// model that holds "H100" as a word would otherwise draw every job that
// asks for one, which the rogue would never take.
func (r *Rogue) OfferEscapes(ctx context.Context) error {
	o := market.Offer{Provider: r.self.String(), GPUs: r.GPUs(EscapeModel, 1, 80<<30), CPUs: 64, MemoryBytes: 256 << 30, Draining: true}
	return r.setOffer(ctx, o)
}

// Escapes is the result of OfferEscapes as a reader saw it: printed is
// what an honest node's `e31 nodes` wrote, listed whether the rogue's
// offer was in that node's view.
func Escapes(printed []byte, listed bool) Result {
	res := Result{Attack: AttackEscapes}
	step := Step{What: "offer", Answer: Accepted, Err: "in the reader's view"}
	if !listed {
		step = Step{What: "offer", Answer: Refused, Err: "not in the reader's view"}
	}
	res.Steps = append(res.Steps, step)
	esc, bel := bytes.Count(printed, []byte{0x1b}), bytes.Count(printed, []byte{0x07})
	res.note("`e31 nodes` printed %d ESC and %d BEL bytes", esc, bel)
	return res
}
