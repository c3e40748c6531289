package ledger

import (
	voi "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"
)

// Batch verification checks n Ed25519 signatures with one multiscalar
// multiplication over a random linear combination of their equations,
// about four times cheaper per signature than checking each (from ~128
// signatures up). It answers only "all valid" or "at least one is not", so
// a failed batch is checked again one signature at a time to find which.
//
// It is used where many signatures are re-checked at once (Ledger.Verify,
// VerifyExport), never to decide what a ledger stores: Append checks each
// signature alone under crypto/ed25519's rules.
//
// How it relates to crypto/ed25519.Verify:
//   - anything crypto/ed25519 accepts, the batch accepts: a valid signature
//     satisfies the batch's (cofactored) equation exactly;
//   - the encodings are held to crypto/ed25519's rules: S canonical, R the
//     canonical encoding of a point, A anything that decodes;
//   - the batch checks the equation multiplied by the cofactor 8, which
//     crypto/ed25519 does not. The two differ only on a signature whose
//     key or R has a small-order component, which no honest signer makes.
//     Keys are checked for one once (pubKey.batchable) and such keys are
//     never batched. A signer who builds its R with one on purpose gets a
//     signature the batch accepts and crypto/ed25519 refuses; it can only
//     do that to its own signatures, and Append refuses them, so no honest
//     ledger holds one. Checking every R for it would cost more than the
//     batch saves.

// batchRules are crypto/ed25519's encoding rules with the cofactored
// equation that batching needs. Never written.
var batchRules = &voi.Options{Verify: &voi.VerifyOptions{
	AllowSmallOrderA:   true,
	AllowSmallOrderR:   true,
	AllowNonCanonicalA: true,
}}

// sigItem is one signature to check.
type sigItem struct {
	key      *pubKey
	msg, sig []byte
}

// verifySigs reports whether every item's signature verifies. Items whose
// key cannot be batched are checked one by one, the rest in one batch.
func verifySigs(items []sigItem) bool {
	bv := voi.NewBatchVerifierWithCapacity(len(items))
	batched := 0
	for i := range items {
		it := &items[i]
		if it.key.batchable && len(it.sig) == voi.SignatureSize {
			bv.AddExpandedWithOptions(it.key.exp, it.msg, it.sig, batchRules)
			batched++
			continue
		}
		if checkSig(it.key, it.msg, it.sig) != nil {
			return false
		}
	}
	// VerifyBatchOnly takes its random coefficients from crypto/rand: an
	// attacker who could predict them could make bad signatures cancel.
	return batched == 0 || bv.VerifyBatchOnly(nil)
}
