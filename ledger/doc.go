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
// at most, no unknown fields, Receipt.Validate's structural rules, and no
// control or bidi character in its text (a reason, GPU models), which a
// terminal listing it would obey. Validate leaves that last rule out, so
// that receipts stored before it still verify and read; e31 prints them
// escaped.
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
//
// # Signatures
//
// Receipts are signed and checked with curve25519-voi (sigs.go), which
// makes the same Ed25519 signatures as crypto/ed25519 at about half the
// cost and, checking one signature, accepts exactly what
// crypto/ed25519.Verify accepts. Append checks each signature that way,
// with the signers' keys expanded once and cached, except the ones this
// process made on the receipt itself: signing checks the key whole (once,
// for a node's SigningKey, which then signs its leases and gossip too), so
// those are valid by construction, and the receipt notes them by the exact
// bytes they cover (signedHere), so a receipt changed after signing is
// checked in full. Verify and VerifyExport,
// which re-check many signatures at once, check them in batches of 256
// spread over GOMAXPROCS goroutines (batch.go, which says where a batch's
// verdict can differ from crypto/ed25519's and why that cannot put a
// receipt in a ledger).
//
// # One-sided records, disputes and settlement
//
// Every lease both parties signed ends in a record on every surviving side.
// Where the other party vanished before it could countersign, the survivor
// stores a one-sided final record (Receipt.Signer names it, SignOneSided,
// Ledger.AppendOneSided): the held interval as it saw it, outcome,
// attribution and reason, signed under its own domain ("e31-record/1\n")
// together with the lease evidence (LeaseEvidence: the exact terms both
// signed and both signatures over "e31-lease/1\n" + terms). A third party
// checks such a record with the peer IDs inside it alone.
//
// When the other side returns, the two either sign a final receipt, which
// Ledger.Append stores and which supersedes the lease's one-sided records,
// or record a dispute (Ledger.RecordDispute): an entry that keeps both
// parties' signed versions. Nothing is deleted or overwritten; queries mark
// what was superseded (Entry.Superseded) and Ledger.Lease tells how a lease
// stands (open, two-sided, one-sided, disputed). ByLease lists only the
// two-sided chain, whose length is the next seq. Ledger.Verify checks the
// single signature and lease evidence of one-sided records and both
// versions of disputes, and counts the one-sided records and disputes not
// yet settled.
//
// Receipts may name the leased GPUs' model (GPUModel). It is appended to
// the signing bytes only when set, so receipts signed before it existed
// keep their bytes and signatures. A final receipt may also name the GPUs
// the provider's sandbox found before the run (GPUsSeen, UUID and model as
// the driver reports them), appended after GPUModel on the same terms:
// with both parties' signatures it proves what a job ran on, whatever the
// offer said. And it may name the relay its lease's data moved through
// where no hole was punched between the parties (Relay), and when its last
// checkpoint was taken (CheckpointAt). Any receipt may name the CPUs,
// memory and disk its lease held beside its GPUs (held.go), appended last:
// a third party checks the CPUs and memory against the lease's terms.
//
// # Export
//
// Ledger.Export writes a self-contained JSON file (format "e31-receipts/1")
// of the receipts, records (with their evidence) and disputes a filter
// selects; VerifyExport checks every signature in it with no daemon and no
// network, and names the first entry that fails.
//
// # Usage and what is owed
//
// Ledger.Usage sums GPU-hours held (GPUs × held time) per counterpart and
// per GPU model, split by outcome and attribution, and marks what a Policy
// makes owed; beside them CPU-hours, owed alike, and GiB-hours of memory
// and disk, where receipts name them, so that a job without GPUs shows
// what it held. Each lease counts once, by one record: its two-sided final
// receipt; else, if disputed, this node's version; else its last one-sided
// record; else its latest interim receipt. One-sided and disputed time is
// reported apart, since it rests on one party's word.
//
// DefaultPolicy owes held time by who caused the end:
//
//   - queued time is never owed: it is never held, so no receipt covers it;
//   - attribution job (completed, the job's own failure, its limit) and
//     submitter (withdrawn) are owed;
//   - attribution provider or network (provider-lost, output-lost, a
//     failure of the provider or of staging) are not owed;
//   - a lease still open is owed up to its latest countersigned receipt;
//   - a lease whose provider is its submitter (a node's own job on its own
//     GPUs) is held and owed by no one, whatever its ending: no one else
//     lent anything;
//   - a lease whose replica a verdict the ledger keeps found against the
//     majority (Verdict.Losers, Policy.Lost) is held and not owed, whatever
//     its ending: its result was not the work asked for.
//
// Policy.Bill applies these rules to one lease, and is the only place they
// are applied: Usage, HeldByJobs (what a job's status shows), SumEntries
// and VerifyExport all add up its LeaseBills, so held, owed and not owed
// agree wherever they are shown.
package ledger
