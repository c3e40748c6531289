// Package market holds what every E31 peer must agree on about jobs:
// declarations (what a submitter asks for) and Match (which open job goes to
// which provider). It is the pure core of the network, in the way raft's
// RawNode is: a value goes in, decisions come out as data, and the node
// carries them out. market does no I/O, reads no clock, draws no random
// numbers and never depends on map order; deps_test.go keeps it that way.
// Instants are int64 milliseconds since the Unix epoch and spans are
// Duration, so time is always an input.
//
// # Declarations
//
// DecodeDeclaration reads the YAML (or JSON) a person writes, strictly: an
// unknown field, a missing work, request or output section, or a bad value
// is a Problem naming the field and what is wanted, and every problem is
// reported at once in a *DeclarationError. Aliases are expanded under a
// small budget, so a "billion laughs" document is refused after a thousand
// nodes. Omitted fields take defaults before checking: request.cpus 1,
// request.memory 1GiB, output.checkpoints.max_resumes 3 with resume: auto.
// request.gpus may be 0, for CPU-only jobs. Validate applies the same rules
// to a declaration that arrived already decoded (from gossip), where nothing
// is defaulted; Canonical gives the bytes to sign.
//
// work.image names the job's software as an OCI image in skopeo's
// transport syntax (oci:, oci-archive:, docker-archive:, docker://) or as
// the CID of an image already imported; image.go lists the forms. Only the
// shape is checked here. The submitting node imports the image and
// rewrites work.image to the CID of its DAG before signing, adding
// work.image_ref, the docker:// reference pinned to the manifest digest,
// when the image came from a registry; a broadcast declaration names its
// image by CID only.
//
// # Matching
//
// Match(view) runs once per epoch on a view frozen for it. The view is
// normalized (every collection sorted, duplicates dropped by a rule that
// ignores arrival order) and hashed with SHA-256; ties are broken with the
// seed SHA-256(epoch ‖ view hash), through H(seed ‖ name), which is
// SipHash-2-4 keyed by the seed (siphash.go). The pipeline, for each job in
// priority order:
//
//  1. Order (order.go). A starving tier first: jobs at least StarvingAfter
//     old, oldest first. Then the rest by their submitter's dominant share of
//     recent use, recomputed as the pass assigns, ties by H(seed ‖ submitter);
//     a submitter's own jobs by SubmittedAt, then H(seed ‖ job).
//  2. Feasibility (feasible.go). Filters, each a small type: gpu_model,
//     gpu_memory, gpus (too few devices at all), busy (too few free now),
//     cpus, memory. An offer turned away is counted under the first filter
//     it fails, which is what Wait.Counts and Wait.Reason report.
//  3. Fit (fit.go). Best fit: fewest free devices left over, then least
//     memory left over, so that a 1-GPU job does not break up the only free
//     8-GPU machine. Ties go to the provider nearest the job by the
//     rendezvous weight H(seed ‖ provider) XOR H(seed ‖ job) (trie.go).
//  4. Reserve and backfill (reserve.go). The first K jobs that cannot start
//     each reserve the provider whose leases free enough for them earliest,
//     counting every lease as ending at Start+Limit. A later job may use a
//     reserved provider only if Now + its limit ≤ the reservation's start:
//     it then gives back everything it holds before the reserved job needs
//     it, so the reserved capacity is still there at that instant.
//
// Nothing is assigned twice within a pass: each placement takes its devices,
// CPUs and memory out of the offer before the next job is looked at.
//
// # Cost
//
// A pass over P providers and J jobs costs O(J log J) for the order, plus
// for each job a walk over the placement index (a few hundred classes of
// like offers at most, never the P offers behind them) and a descent of
// ⌈log₂ P⌉ trie levels to pick the provider; only the first K blocked jobs
// scan every provider to reserve one. At 10,000 providers and 100,000 jobs
// the constant factors are what count, and most of them are memory: hashing
// the view (SHA-256, about a tenth of the pass and fixed by the view's
// encoding), and cache misses when the jobs are visited in priority order,
// which is no order in memory. So the view's jobs are read once, in ID
// order, into small records holding all the walk needs (tie-break hash
// included), and those records are copied into the order they will be
// visited in before the walk starts. BenchmarkMatch measures it;
// TestMatchGolden holds the result of its view, byte for byte, as the code
// stood before any of this.
//
// # Claims
//
// Match proposes; the signed lease decides. Only the provider that Match
// assigned a job proposes it, and only from its own pass, so the provider's
// Match is the claim. A proposal records the epoch, the view hash and the
// job's Rank, as evidence of which pass chose the pair. The provider is the
// arbiter: it holds the devices before it proposes and proposes only while
// none of them is held, so between two claims on the same devices the
// first one proposed wins and the other waits for a later pass; the
// submitter accepts one proposal per job. Peers whose views differ can lose
// a round, never double-book a device. A job that loses keeps its
// SubmittedAt and so its age.
//
// # The epoch's view
//
// Match is pure, so peers agree on its result exactly when they agree on its
// view. The node cuts the view of the epoch starting at S at S − D: a
// message — offer, declaration, lease, release, withdrawal; additions and
// removals alike — is in the view if its author signed it by S − D and it
// reached the peer by S (a message whose signing time lies ahead of its
// arrival, the author's clock running fast, counts from its arrival). So
// every peer to which gossip brought all messages signed by S − D before S
// holds the same view, however late its own timer fires: D must exceed
// gossip's delay, measured where the node hands a message to its view, and
// clock skew. Cut on arrival times alone, no D helps: two peers disagree
// whenever the cutoff falls between a message's two arrivals. Cut on
// signing times alone, a peer that cuts late counts messages that a
// punctual one could not.
//
// What happens after the cutoff is acted on, not matched on: a provider
// proposes only for a job open in what it has received, on devices it does
// not hold. A claim made in epoch k becomes a lease a round trip later
// (proposal and acceptance), signed near S + 2g for gossip delay g; it is in
// epoch k+1's view only if signed by S + E − D. If not, the job is still
// open in every peer's view of k+1 alike and Match places it again: on the
// same provider and devices, which then proposes nothing, unless jobs new
// to the view shift it, and then another provider proposes it (declined:
// the submitter took the first) or the held devices go to another job (a
// lost round). Hence D ≤ E/2, leaving half an epoch for claims, and an
// epoch must be long enough for both halves: measured at 300ms one-way
// (testnet/epochbench), 1s epochs put D at its ceiling and still lost 20
// rounds per 100 jobs (the fixed 150ms delay 44), some of them to held
// devices, with 11 declined proposals per 100 jobs; 2s epochs lost none.
// A node warns when its delay sits at the ceiling.
//
// D adapts to the network, and every peer must derive the same D for the
// same epoch, so D cannot come from what a peer measured itself. Each node
// keeps the delays it observed (arrival minus signing time of the last 256
// gossip messages from other peers, leaving out messages signed before it
// had been up for five seconds: gossipsub hands a newcomer recent history,
// whose age is not a delay); a provider announces the p99 of that window,
// in whole milliseconds, in every offer it publishes (0: no figure yet).
// The delay of the epoch starting at S is derived from the offers as they
// stood at the announcement cut S − E/2, E the epoch length, a distance
// fixed for the network:
//
//	D = clamp(P + max(P/4, 10ms), 20ms, E/2)   P = the largest p99 announced
//	D = min(150ms, E/2)                         while no offer announces one
//
// The offers at S − E/2 are the same on every peer whose gossip is faster
// than E/2, which a D up to E/2 needs anyway, so the rule is deterministic
// wherever the cut it sets can be. The largest announcement rules because
// the slowest provider is the one whose view must still hold the jobs; a
// provider announcing too much only makes epochs start later (D ≤ E/2), one
// announcing too little makes itself lose rounds. A node configured with a
// fixed delay uses it as is; a network must not mix the two.
//
// Gossip's tail, not its median, sets D: measured over links of one-way
// latency L (testnet/epochbench), the median delay is L but the p99 is
// 1.1–2 L, and several times L on a loaded machine. Providers'
// announcements lag the network by a heartbeat, so a sudden rise of gossip
// delay costs rounds until the next offers carry it; a peer whose gossip is
// slower than E/2 may differ in its delay as well as its view. In both
// cases the cost is rounds, never a double booking (see Claims).
//
// # Straight to rent
//
// A job should not wait for an epoch when compute that fits it is free.
// Between epochs, whenever a job is declared or requeued or a lease is
// released, a provider runs Match at once on its view as it stands (every
// open job and live lease that has arrived, its own offer as it is now) and
// proposes what that pass assigns to it; it arbitrates as for any proposal.
// The rule that keeps this fair: a provider leases between epochs only what
// Match, with the epoch's rules and options, assigns it on its current
// view. Match places jobs in priority order (starving tier, dominant share,
// age) and keeps reservations, so the capacity a pass gives a job is
// capacity no job ahead of it in the view could use, and a reserved
// provider is backfilled only by a job that gives everything back before
// the reservation starts: exactly what the next epoch's pass would do on
// that view. A job's age is the epoch start that first holds it; a job no
// epoch has held yet is given, for the pass only, the start it will get, so
// a job declared earlier never ranks behind a later one for being unfixed.
// What the view lacks (a declaration still in flight) is what an epoch's
// cut lacks too.
//
// The pass runs only while at most 10,000 jobs are open in the view (beyond,
// the epoch's pass, which every peer runs on the same frozen view, decides
// alone), only on a provider whose own offer shows a GPU free (Match could
// assign it nothing else), and over a deep queue (more than 64 open jobs)
// passes are paced to a fifth of a core. A provider whose GPUs come free in a deep queue thus
// takes the next job by the same order an epoch would, without waiting for
// one. A pass between epochs is one node's view, so two providers may both
// propose one job; the submitter accepts one proposal per job and the
// other provider's devices are free again at once. A provider proposes a
// job at most once while it holds devices for it, so an epoch whose cut does
// not yet show the lease does not lease the job twice. Double leases stay
// impossible for the reason they are impossible within an epoch: the
// provider holds the devices before it proposes.
//
// # Starvation bound
//
// Let A be StarvingAfter, E the epoch length, Lmax the longest limit of any
// lease on the providers concerned (at most MaxLimit), R the time from a
// lease's limit to its release being in the view (grace period plus
// announcement), C the time for an assignment to become a signed lease, and
// q the number of jobs older than job J, still waiting when J turns
// starving, that some provider could hold. If
//
//   - reservations and the starving tier are on (K ≥ 1, A > 0),
//   - every peer matches the same view each epoch and claims settle within C,
//     before the next pass,
//   - providers enforce limits, so a lease is over by Start+Limit and its
//     release is in the view within R,
//   - some provider able to hold J stays in the view with the same devices,
//   - SubmittedAt is set by the node when a job first enters its view, so no
//     job older than J shows up later,
//
// then J's lease is signed no later than
//
//	SubmittedAt + A + E + (q + 1) · (Lmax + R + E) + C.
//
// Why: within one epoch of reaching age A, J is in the starving tier, behind
// only the q older jobs, a number that only falls. The oldest waiting job H
// is looked at first in every pass. If it cannot start, it is the first
// blocked job and reserves the provider P that will have room earliest,
// at some S ≤ now + Lmax. In later passes H is still first, so it reserves
// again before anything else is placed, and nothing placed on P meanwhile
// ends after S (that is the backfill rule), so its earliest instant never
// moves later. By S + R the room is in the view and within another E a pass
// places H. The next job then becomes first in that same pass. Each of the
// q + 1 jobs thus takes at most Lmax + R + E.
//
// K > 1 lets the next K−1 blocked jobs hold providers at the same time,
// which in a fleet of like machines brings the wait near ⌈(q+1)/K⌉ rounds,
// but that is not guaranteed: Match keeps no state, and a job placed in one
// pass may take, by best fit, the provider another job had reserved in the
// previous pass. The bound above uses only the first reservation, which
// nothing can take. starve_test.go checks it under a stream of small jobs.
package market
