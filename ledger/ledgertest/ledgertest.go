package ledgertest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Party is a peer identity whose key comes from a seed, so that runs are
// reproducible.
type Party struct {
	Key crypto.PrivKey
	ID  peer.ID
}

// NewParty derives a party from seed.
func NewParty(tb testing.TB, seed byte) Party {
	tb.Helper()
	sk, _, err := crypto.GenerateEd25519Key(bytes.NewReader(bytes.Repeat([]byte{seed}, 32)))
	if err != nil {
		tb.Fatal(err)
	}
	id, err := peer.IDFromPrivateKey(sk)
	if err != nil {
		tb.Fatal(err)
	}
	return Party{Key: sk, ID: id}
}

// Lease is a lease whose receipts a test signs. Receipt seq n holds its
// GPUs from From for n+1 minutes.
type Lease struct {
	ID, Job             string
	Provider, Submitter Party
	GPUs                int
	GPUModel            string
	From                time.Time
}

// receipt is the unsigned receipt seq of the lease, following prev.
func (l Lease) receipt(seq uint64, prev string) ledger.Receipt {
	return ledger.Receipt{
		Lease: l.ID, Job: l.Job, Provider: l.Provider.ID, Submitter: l.Submitter.ID,
		GPUs: l.GPUs, GPUModel: l.GPUModel, Seq: seq,
		HeldFrom: l.From, HeldUntil: l.From.Add(time.Duration(seq+1) * time.Minute),
		Phase: ledger.PhaseRun, Prev: prev,
	}
}

// end makes r final with cause c.
func end(r ledger.Receipt, c ledger.Cause) ledger.Receipt {
	code := 0
	r.Final, r.Phase = true, ledger.PhaseOutput
	r.Outcome, r.Attribution = c.Outcome, c.Attribution
	r.ExitCode, r.Reason = &code, "test ending"
	return r
}

// next returns the seq and prev of the receipt after chain.
func next(chain []ledger.Receipt) (uint64, string) {
	if len(chain) == 0 {
		return 0, ""
	}
	last := chain[len(chain)-1]
	return last.Seq + 1, last.Digest()
}

// Chain returns n receipts both parties signed, linked; the last is final
// with cause c when c is not nil.
func (l Lease) Chain(tb testing.TB, n int, c *ledger.Cause) []ledger.Receipt {
	tb.Helper()
	var out []ledger.Receipt
	for i := range n {
		seq, prev := next(out)
		r := l.receipt(seq, prev)
		if c != nil && i == n-1 {
			r = end(r, *c)
		}
		if err := r.SignProvider(l.Provider.Key); err != nil {
			tb.Fatal(err)
		}
		if err := r.Countersign(l.Submitter.Key); err != nil {
			tb.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// OneSided returns a final record after chain signed by signer alone
// (ledger.SignerProvider or SignerSubmitter), with the lease evidence both
// parties signed; it claims extra more minutes than the last receipt.
func (l Lease) OneSided(tb testing.TB, chain []ledger.Receipt, extra int, signer ledger.Signer, c ledger.Cause) ledger.Receipt {
	tb.Helper()
	seq, prev := next(chain)
	r := end(l.receipt(seq+uint64(extra)-1, prev), c)
	r.Signer = signer
	r.Evidence = l.Evidence(tb)
	key := l.Provider.Key
	if signer == ledger.SignerSubmitter {
		key = l.Submitter.Key
	}
	if err := r.SignOneSided(key); err != nil {
		tb.Fatal(err)
	}
	return r
}

// ProviderOnly returns a final receipt after chain that the provider signed
// and the submitter would not countersign: the provider's side of a
// dispute.
func (l Lease) ProviderOnly(tb testing.TB, chain []ledger.Receipt, c ledger.Cause) ledger.Receipt {
	tb.Helper()
	seq, prev := next(chain)
	r := end(l.receipt(seq, prev), c)
	if err := r.SignProvider(l.Provider.Key); err != nil {
		tb.Fatal(err)
	}
	return r
}

// Evidence returns lease terms shaped like the node's, signed by both
// parties under the lease domain.
func (l Lease) Evidence(tb testing.TB) *ledger.LeaseEvidence {
	tb.Helper()
	uuids := make([]string, l.GPUs)
	for i := range uuids {
		uuids[i] = fmt.Sprintf("GPU-%08d", i)
	}
	terms, err := json.Marshal(map[string]any{
		"id": l.ID, "job": l.Job, "provider": l.Provider.ID.String(), "submitter": l.Submitter.ID.String(),
		"gpus": uuids, "proposed": l.From.UnixMilli(),
	})
	if err != nil {
		tb.Fatal(err)
	}
	msg := append([]byte(LeaseDomain), terms...)
	ev := &ledger.LeaseEvidence{Terms: terms}
	if ev.ProviderSig, err = l.Provider.Key.Sign(msg); err != nil {
		tb.Fatal(err)
	}
	if ev.SubmitterSig, err = l.Submitter.Key.Sign(msg); err != nil {
		tb.Fatal(err)
	}
	return ev
}

// LeaseDomain is the prefix both parties sign lease terms under
// (node/wire.go); the ledger checks evidence against it.
const LeaseDomain = "e31-lease/1\n"
