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
//  2. Feasibility (feasible.go). Filters, each a small type: reachable,
//     draining, closed (outside its contribution hours), no_disk (the
//     offer lends no disk: NoDisk), images, require_image, cpu_jobs (a job
//     without GPUs on an offer with NoCPUJobs), disk (request.disk above
//     the offer's MaxJobDisk, what it can grant now), gpu_model, gpu_memory, gpus (too few devices at all), window (its
//     contribution hours end before Now + the job's limit; for a job that
//     checkpoints and fits nowhere whole, before Now + its checkpoint
//     interval + WindowMargin: see Contribution hours), busy (too few
//     free now), cpus, memory. An offer turned away is counted under the
//     first filter it fails, which is what Wait.Counts and Wait.Reason
//     report.
//  3. Fit (fit.go). Best fit: fewest free devices left over, then least
//     memory left over, so that a 1-GPU job does not break up the only free
//     8-GPU machine. Ties go to the provider nearest the job by the
//     rendezvous weight H(seed ‖ provider) XOR H(seed ‖ job) (trie.go).
//  4. Reserve and backfill (reserve.go). The first K jobs that cannot start
//     each reserve the provider whose leases free enough for them earliest,
//     counting every lease as ending at Start+Limit. A later job may use a
//     reserved provider only if Now + its limit ≤ the reservation's start:
//     it then gives back everything it holds before the reserved job needs
//     it, so the reserved capacity is still there at that instant. A job
//     reserves a provider with contribution hours only if the
//     reservation's start + its limit ≤ the offer's OpenUntil.
//
// Nothing is assigned twice within a pass: each placement takes its devices,
// CPUs and memory out of the offer before the next job is looked at. A
// gang (request.nodes ≥ 2) goes through the same steps as one unit, each
// of its parts on a provider of its own (see Gangs).
//
// # Cost
//
// A pass over P providers and J jobs costs O(J log J) for the order, plus
// for each job a walk over the placement index (a few hundred classes of
// like offers at most, never the P offers behind them) and a descent of
// ⌈log₂ P⌉ trie levels to pick the provider; only the first K blocked jobs
// scan every provider to reserve one. A gang of N parts costs N such
// searches, and a blocked gang among the first K sorts its candidate
// providers once (O(P log P)) to find its common start. A view with a gang
// missing some parts is read once more, its leases by job, to find the
// leased parts; a view without one pays nothing for it. At 10,000 providers and 100,000 jobs
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
// (testnet/bench/epoch), 1s epochs put D at its ceiling and still lost 20
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
// latency L (testnet/bench/epoch), the median delay is L but the p99 is
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
// A provider given a job whose inputs it lacks may fetch them before it
// proposes (node/provider): its offer still shows the devices free, so
// every pass keeps giving the job there, by the same order, and no other
// job takes that capacity meanwhile. It only delays its own proposal,
// which the rule above already allows any provider to do.
//
// # Data gravity
//
// A job's inputs and image move to whichever provider runs it, so a
// provider that already holds them starts sooner and costs the submitter
// no upload. At submit the node records each input's root (the source,
// rewritten to a CID) with its size in bytes (data[i].size), and the
// image's (work.image_size); they are part of the signed declaration and
// reach Match as Job.Data. A provider's offer carries Holdings: what it
// has cached. Both sides are bounded: a job lists at most MaxInputs inputs
// plus its image, sizes at most MaxInputSize.
//
// Holdings list the provider's MaxHeldRoots (128) largest roots with their
// sizes and put the next HoldingsBloomCapacity (4,096) in a Bloom filter
// (github.com/bits-and-blooms/bloom/v3) built for a 1% false-positive rate
// at the number of roots it holds (at least 256, 307 bytes): at most 39,261
// bits and 7 hashes. At capacity that is about 18KiB of JSON (each listed
// root ~90 bytes, the filter 6.6KiB in base64), a quarter of the 64KiB
// gossip payload, whatever else the offer says. The
// largest roots are listed because they weigh most and a listing is exact;
// the filter keeps the long tail in at most 4.8KiB. Roots beyond both
// (the smallest) are left out: they weigh least. NewHoldings depends only
// on the set of roots, never their order, and the filter's bytes are the
// library's MarshalBinary of bits set by the roots alone, so a provider
// that rebuilds from the same cache sends the same bytes, and every peer
// reads the same offer and view hash. A filter's header is checked against
// the bounds before it is decoded (Holdings.Check), so no offer can make a
// peer allocate more than 4.8KiB for it.
//
// A root counts as held when the offer lists it or its filter has it, and
// weighs the size the job's declaration gives it (each root once, at its
// largest). A false positive (about one root in a hundred that the filter
// does not hold) costs only a worse choice: Match prefers a provider that
// lacks the data, which then fetches it as any provider would. Correctness
// never rests on holdings; they only steer.
//
// The locality rule, in place (locality.go): among the providers that can
// take the job now, under exactly the filters and backfill rule of
// ordinary placement, choose the one holding the most of the job's bytes;
// ties, and jobs whose data no feasible provider holds, go by best fit and
// the rendezvous weight as before. A job with request.locality: off is
// placed by best fit alone. All of it is integer arithmetic on the view, in
// sorted order, so every peer gets the same assignment. Only jobs that
// read data pay for it: the holders of each root those jobs read are found
// once per pass (an index of listed roots, and each filter tested against
// all roots while its bits are in cache), and each such job then looks at
// its holders alone. BenchmarkMatchLocality is BenchmarkMatch with a tenth
// of the jobs reading data held by a few providers.
//
// Delay scheduling (after Zaharia et al., EuroSys 2010): a job may declare
// request.locality_wait, up to MaxLocalityWait (5m). Until SubmittedAt plus
// that wait, if no provider holding its data can take it now but one could
// once it has room, the job waits rather than take another; its reason
// says "waiting for a provider that holds its data, until T". It is a
// setting of the job, signed in its declaration, not of a peer: a flag
// that peers could set differently would give them different views of the
// same job and cost rounds. The daemon's --locality-wait and --no-locality
// only fill in what a declaration submitted through that node leaves out.
// Age is measured from SubmittedAt, the epoch start that first held the
// job, which every peer derives alike.
//
// The pass between epochs (Straight to rent, below) is Match on the
// node's current view, whose offers carry their holdings and whose jobs
// carry their data as the epoch's do, so it follows the same rule: a job
// is leased straight away to the holder that the epoch would choose, and a
// job waiting for a holder is not leased to another between epochs.
//
// Why neither breaks fairness or the starvation bound: locality changes
// which feasible provider a job is placed on, never the rules that order
// jobs, decide which may reserve, or say what a reserved provider accepts
// (a job backfills a reserved holder only if its limit ends before the
// reservation starts, as any job). A placed job charges its submitter the
// same whatever provider it went to. Placing a job elsewhere can leave
// room for a different later job than best fit would have, and so shift
// the order among submitters, exactly as best fit's own choices do; the
// starving tier, which the bound rests on, is ordered by age alone before
// any placement, so it is visited in the same order with locality or
// without (TestLocalityKeepsStarvingTier). A job that waits for locality
// takes nothing, so every job behind it sees at least the room it would
// have seen had the job been placed; it takes no reservation either, so it
// cannot displace the first blocked job's. And a starving job never waits
// for locality: once a job reaches StarvingAfter it is placed as soon as
// anything fits, as before; MaxLocalityWait is half the default
// StarvingAfter. So the bound below holds as written: in it, locality can
// only make a job's placement land on another feasible provider, which the
// argument never relied on.
//
// # Contribution hours
//
// A contributor may lend its GPUs only at set times (node/hours). Its offer
// then says Closed while it is outside its hours, and OpenUntil, when the
// window it is in ends. A closed provider is given nothing and, like a
// draining one, is reserved for no job: its GPUs are not coming back soon.
// An open one takes jobs whose declared limit ends by OpenUntil, now
// or, for a reservation, from the reservation's start; providers enforce
// limits, so such a job is over before the owner wants the machine back.
//
// A job that checkpoints (Job.Checkpoint, from output.checkpoints.every)
// may also be cut at the close: the provider preempts it then with its
// grace, it is owed up to its last checkpoint, and its submitter puts it
// back in the queue to go on from there elsewhere. The rule and its order
// (window.go): a job is placed where it fits whole if any offer takes it
// whole now (locality, best fit, rendezvous weight, as for every job);
// else, if it checkpoints, where the window leaves it at least one
// checkpoint interval plus WindowMargin from now, by best fit and the
// rendezvous weight; else it reserves, only where its whole limit fits
// the window from the reservation's start. Parts of gangs and jobs
// without checkpoints keep to whole fit alone. The interval is hashed
// with the job only when set, so views without it hash as before; a peer
// of an earlier version, which does not read it, places such a job only
// whole, and so may lose a round to a peer that cuts it, never double-book
// (see Claims).
// Both are signed in the offer and hashed with the view only when set, so
// every peer filters alike and views without hours hash as before. In the
// starvation bound below, a provider that closes is one that leaves the
// view.
//
// # Prices
//
// An offer names a price: what an hour of one of its GPUs costs, in the
// network's currency, as a Price (millionths of a unit, so that every
// comparison is of integers and alike on every peer). A job may cap what
// it pays per GPU-hour (request.max_price). Both are signed, and both are
// hashed with the view only when set. The cap is a filter, after the
// device count and before the window (price): an offer above it never
// takes the job, and a job every offer's price turns away waits saying
// so, with the cheapest price in view ("the cheapest asks 2.40 per
// GPU-hour, the cap is 2.00"). A job without GPUs is not capped: prices
// are per GPU.
//
// How price weighs against the rest: data gravity first, then best fit,
// then price, then the avoid count and the rendezvous weight. Locality
// comes first because a holder saves the submitter the staging hours,
// which it pays at the lease's price too, and the wait for them; best fit
// before price because a one-GPU job that took a GPU of the only free
// eight-GPU box, however much cheaper, would leave a whole-box job or a
// gang waiting for it, which costs the network more than the difference.
// So among places that fit a job alike, the cheaper wins; a reservation
// takes the provider free earliest, then the cheaper. Within one
// submitter and across submitters the order of jobs does not change:
// fairness decides who goes first, and each job in its turn takes the
// cheapest place that fits it best.
//
// # Avoided providers
//
// A provider may take a place in Match and never serve it: it advertises
// GPUs and does not propose for the jobs assigned to it, or signs a lease
// and never starts the run. Job.Avoid is the defence, and it is part of the
// view (it is hashed with the job), so every peer decides on it alike:
//
//   - For the job itself, an avoided provider is invisible: the job is not
//     placed on it, does not reserve it and does not backfill it
//     (avoid.go). The submitter names providers in the job's signed
//     re-announcement (node/wire, requeue); nobody else can add to a job's
//     list, and a submitter that names an honest provider only narrows the
//     choice for its own job.
//   - Across jobs, a provider's failures are the number of distinct
//     submitters whose jobs in the view name it. Best fit compares them
//     after the fit itself (devices, then memory left over) and before the
//     rendezvous weight: among offers that fit a job equally well, the one
//     fewer submitters have named wins. Nothing else changes: a named
//     provider still takes every job that no better-standing one fits.
//
// Why a liar cannot lower an honest provider cheaply: a failure counts a
// submitter once, however many jobs it names the provider in, so one
// identity buys one step of demotion at most; each step must be kept alive
// by an open job that its submitter keeps re-announcing (a job that is
// leased or pruned leaves the view, and its avoid list with it), under the
// per-submitter bound on open jobs; and the demotion only loses ties of fit,
// never a job the provider alone fits. A provider that really fails is
// named by every submitter it fails, so its count grows with its victims,
// and the count falls back by itself once it stops failing.
//
// # Gangs
//
// A job that needs more GPUs than one contributor has runs across several:
// request.nodes N, from 2 to MaxNodes (64), with every other field of the
// request per node. Its one signed declaration is N jobs in every peer's
// view, GANG.0 to GANG.N-1 (TaskID), with the same request, submitter and
// submission time; part i runs Task(i), whose environment carries
// E31_NODE_RANK and RANK = i, E31_NUM_NODES and WORLD_SIZE = N (the
// provider adds the addresses only it knows). An array of gangs is
// refused. Match (gang.go):
//
//   - Order: the gang is one unit, visited where its best-ordered part
//     falls, and its parts take consecutive ranks, so no job slips between
//     them. Each placed part charges its submitter as a job of its own, so
//     a gang of N weighs N jobs in the dominant share.
//   - Placement, all or none: part by part, in rank order, each goes where
//     a lone job of its request would go now (locality, best fit, the
//     rendezvous weight, the backfill rule), among the providers not yet
//     picked for the gang nor running one of its leased parts (see Partly
//     leased). If one part finds none, no part is placed. Two parts never
//     share a provider, even one with room for both: the gang declared N
//     machines, and a run laid out for N hosts is not the same run on
//     fewer. A part never waits for a provider holding its data; the gang
//     waits only for room.
//   - Reservation: a gang that cannot start, while fewer than K jobs and
//     gangs of the pass have reserved, reserves N distinct providers for
//     one common start: the earliest instant at which N providers will have
//     room for a part, counting leases as ending at their limits, each
//     provider's contribution window still open for the limit from then.
//     For each part in rank order it takes, of the providers with room by
//     then, the one with room earliest, ties by the rendezvous weight. It
//     counts once toward K. Backfill is unchanged: a later job uses a
//     provider the gang holds only if it is over by the common start, so
//     the providers that free early take short jobs while the gang waits
//     for the last one.
//   - Partly leased: a gang some of whose parts are not open, each of them
//     leased in the view (a lease whose Job is the part's ID), places its
//     open parts as above, all at once or none, each on a provider of its
//     own and none on a provider holding one of its leased parts (read from
//     the view's leases); if they cannot start, they reserve as above, one
//     provider per open part, again none holding a leased part. Claims
//     settle part by part: between epochs providers match on views that
//     differ for a moment (Straight to rent), so one provider may lease
//     part 0 while the provider another pass gave part 0 rather than part
//     1 has its claim declined. Every view then shows part 0 leased and
//     part 1 open; a gang that waited for all its parts to be open again
//     would wait until its submitter gave it up (on a 3-node test network,
//     one gang in three stalled 30 s that way). Only open parts are
//     placed, and never beside a leased one, so the submitter still
//     gathers one part per rank on N distinct hosts (node/submitter).
//   - In flight: a gang with a part neither open nor leased (closed,
//     withdrawn, pruned: a part's run has ended, or its submitter is
//     taking the gang back) is placed nowhere. Its open parts wait, take
//     nothing and reserve nothing, and the submitter settles the gang as a
//     whole.
//   - Why it waits: the same reason for every part, counting distinct
//     providers for the parts still to place: "needs 2 providers with 1
//     free GPU each; 1 has (1 offer busy, 1 free)" when enough offers
//     could hold a part but too few have room now; "needs 3 providers with
//     8 GPUs each; 2 have (…)" when too few could hold one at all; with
//     parts leased, "needs 1 provider with 1 free GPU, apart from the one
//     running its other part; none has (1 offer busy, 1 running another
//     part of the gang)"; "reserved: waiting for 2 providers (A, B) to
//     free 1 GPU each at T", or for one provider; and "gang G is in
//     flight: …". Counts are per offer as for any job, with ReasonFree for
//     offers that could take a part now and ReasonOtherPart for a provider
//     running a leased part that could otherwise take one, now or once
//     free.
//
// Parts that disagree on submitter, request or image, or whose ID is no
// rank of the gang, come from no declaration: they are reported as
// invalid. A provider named in one part's avoid list is avoided by the
// whole gang. Views without gangs match and hash as before (request.nodes
// is hashed only when set).
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
// A gang is one of these units: q counts it once, and the bound holds for
// it as written, with "some provider able to hold J" read as N providers
// able to hold a part each, and with claims settling meaning all N of its
// claims. As the head, it reserves N providers whose latest earliest
// instant S is at most now + Lmax; nothing placed on any of them meanwhile
// ends after S, so in later passes N providers with room by S are still
// there and its start can only move earlier; by S + R all N have room in
// the view, and within another E a pass in which it is looked at first
// places every part (every open part, once some are leased). The jobs behind a gang keep their bound, with the
// gang counted once in their q; but while it waits they lose N providers
// to it, not one, except as backfill, so their waits run longer than
// behind a single job (starve_test.go plays both). A gang whose claims
// settle only in part places the rest as a gang of its open parts, apart
// from the providers running the leased ones; one with a part neither open
// nor leased is in flight and places nothing until its submitter settles
// it, which the bound does not cover, as it covers no claim that never
// settles.
//
// K > 1 lets the next K−1 blocked jobs hold providers at the same time,
// which in a fleet of like machines brings the wait near ⌈(q+1)/K⌉ rounds,
// but that is not guaranteed: Match keeps no state, and a job placed in one
// pass may take, by best fit, the provider another job had reserved in the
// previous pass. The bound above uses only the first reservation, which
// nothing can take. starve_test.go checks it under a stream of small jobs.
//
// # Classes and routing
//
// A network too large for one market splits it by what is offered, not by
// who offers it (class.go). ClassOf names a box's class from its offer's
// GPUs alone, so every peer derives the same one: "cpu", "consumer-24G"
// (consumer cards by memory), or a model family and a box size band,
// "H100x8", "H100x1-4", "A100x5-7", "H200x9+". Every box a job could run
// on is in a class that Fits its request, so splitting by class strands no
// job the way splitting by peer ID does: a rare model's few boxes are all
// in one market, and so are a gang's boxes. A class too large for one
// market is split again into subshards by peer ID; within a class the
// boxes are alike, so the pieces are interchangeable.
//
// A Digest summarises one subshard for the whole network: providers, free
// GPUs per box, queued work, the oldest wait, the largest inputs held. A
// submitter routes each job (route.go) to a subshard of a class that fits
// it by two random choices weighed on headroom: of two fitting subshards
// drawn at random, the one with more boxes free beyond its queue. Always
// taking the single best would herd every submitter reading the same
// digests onto one subshard until the next digest; two choices spread
// load evenly (route_test.go) while still avoiding full subshards. A
// subshard whose providers hold one of the job's inputs comes first where
// it has room: data gravity across subshards, as locality is within one.
// A job that has waited MoveAfter in a subshard with no headroom is moved
// to another with room (Move). Match itself does not change: it runs in
// each subshard as it runs in one market, and is deterministic there.
package market
