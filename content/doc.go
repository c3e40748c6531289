// Package content stores, moves and checks the data of E31 jobs: inputs,
// outputs and checkpoints.
//
// A job's files become a UnixFS DAG (CIDv1, sha2-256, raw leaves, 1 MiB
// chunks) held in a Store: blocks of 32 KiB and more (the leaves) in
// append-only pack files, everything else (small blocks, the size and
// place of every block, pins, the access index) in Badger. A block counts
// as held only once its pack is synced and its record written, so a crash
// never leaves a record naming bytes it lost. The store re-hashes every
// block it hands out, so a damaged disk shows up as ErrInvalidData instead of
// as wrong bytes inside a job. A DAG that a node must keep is pinned with a
// reason ("input of job X", "checkpoint 3 of lease Y"); GC deletes every block
// that no pin reaches.
//
// An Exchange moves DAGs between the two parties of a lease over the node's
// libp2p host. Fetch walks the local copy first and asks only for what is
// missing: nothing when the DAG is complete; otherwise the peer streams, as
// CAR over one libp2p stream (protocol /e31/content/car/1), first the
// structure (dag-pb nodes) of the missing parts, then exactly the leaves not
// already held. A stream has no per-block round trips and costs less CPU per
// byte than bitswap, which is also served and is the fallback for peers that
// do not speak the bulk protocol. Either way every block is hashed on arrival and written in
// batches, and the DAG is pinned only once it is complete: a transfer that
// fails leaves no pin behind, and a retry fetches only what is still missing.
//
// FetchFrom does the same from many peers at once: the structure from one,
// then the missing leaves in batches that the sources take from one queue,
// so a faster source serves more and a source that fails or refuses only
// puts back what it had not delivered. The node names the sources; the
// exchange never asks a peer it was not given.
//
// Content is private to the parties of a job. The Exchange serves a peer only
// blocks of DAGs that Access allows it, and it answers bitswap requests block
// by block from an index of which roots each block belongs to.
//
// Serving runs on what any peer sends, in goroutines that libp2p and
// bitswap start without recovering: a panic while answering a bulk request
// fails that request (statusError, or a reset once data has gone), one in
// the bitswap access check refuses that block, and either is logged with
// its stack and told to ExchangeOptions.Panicked, which the node counts.
//
// Import and Export take trees that others made: the folder a job left, a
// DAG another peer sent. Either can be built to cost without bound while
// looking small: a million empty files or FIFOs, a sparse file of 1 TiB, a
// few MB of blocks that link one zero block a million times, folders nested
// deeper than a goroutine's stack can recurse. So both count a tree before
// writing anything and again while writing, against Limits (file bytes,
// entries, folder depth; folders never nest past DepthCeiling), and refuse
// it with a *LimitError, which wraps ErrTooLarge and names the cap. Export
// counts bytes from the DAG's file sizes only after checking them against
// its leaves, so a file that states a size it does not hold is refused as
// ErrInvalidData, and no walk of a DAG recurses deeper than those bounds.
//
// Progress is reported to an injected Progress sink; how it is shown is up to
// the caller.
package content
