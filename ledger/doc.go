// Package ledger keeps a node's signed receipts of compute held under leases,
// in a hash chain on Badger, and verifies them.
//
// # Receipts
//
// While a lease holds GPUs, the provider signs an interim Receipt every
// interval and the submitter countersigns it; at release a final receipt
// adds the outcome, who caused it and the phase durations. Both parties sign
// the same canonical bytes (Receipt.SigningBytes, prefixed "e31-receipt/1\n"
// so no other E31 signature can pass for one), and Receipt.Verify checks both
// with nothing but the two peer IDs, which embed their Ed25519 public keys.
// Any third party can therefore check a receipt.
//
// Receipts of one lease are cumulative: seq 0, 1, 2, … each restate the
// lease start (HeldFrom), the job, the parties and the GPU count, move
// HeldUntil forward, and carry in Prev the digest of the receipt before. The
// final receipt is the last seq. So the GPU-seconds of a lease are those of
// its final receipt, or of its latest interim one while it runs.
//
// DecodeReceipt is the strict decoder for receipts from the network: 16 KiB
// at most, no unknown fields, and Receipt.Validate's structural rules.
//
// # The store
//
// Ledger.Append verifies a receipt and appends it as an Entry whose Hash
// covers the previous entry's hash, its own index, and the receipt's signing
// bytes and signatures. Ledger.Verify walks the chain, so an entry that was
// edited, reordered or removed, or whose signatures were forged, is named
// (VerifyReport.FirstBad). The chain proves the ledger is whole, not that it
// is the only one: a node could rebuild a whole chain from receipts it holds,
// but never one containing a receipt its counterpart did not sign.
//
// Writes are synchronous (fsync per commit), and a commit costs a flush
// whatever it carries, so one writer goroutine batches concurrent Appends
// into one transaction (group commit). That single writer is also why the
// store needs no conflict detection.
//
// Key layout is described in keys.go.
package ledger
