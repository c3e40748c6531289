// Package view is what a node knows of the network, as Match needs it: the
// providers' latest offers (Offers) and the jobs topic's open jobs, leases
// and releases (Market), each kept with when its author signed it and when
// it arrived (Stamp), so that the view of an epoch can be cut as it stood at
// the epoch's cutoff and every peer decides on the same facts. It also
// keeps the gossip delays a node observed (GossipDelays), which a provider
// announces in its offers, and the rule that turns those announcements into
// each epoch's delay (DelayRule); market/doc.go, "The epoch's view", states
// the rule. And it holds the checks of incoming jobs messages that need
// those facts (JobChecks).
//
// # Bounds
//
// Keys are free: a bound per submitter alone (10,000 single jobs and
// market.MaxArrayTasks tasks each) lets a stranger with twenty fresh
// identities make every view hold gigabytes, and every pass walk millions
// of jobs. So a Market also holds all submitters together to Bounds: at
// most Bounds.Jobs jobs (single jobs, array tasks and gang parts, each
// one, open or closed with its declaration still kept) and
// Bounds.DeclarationBytes bytes of signed declarations (each counted once,
// however many tasks it makes). Closed jobs count until Prune slims them,
// or declaring and withdrawing (or leasing to oneself) at gossip's pace
// would hold a minute of declarations uncounted.
//
// A declaration new to the view enters it first; then, while the view is
// over a bound (jobs first, then bytes), the newest declaration of one
// holder is evicted, the holder chosen thus:
//
//   - only a holder over its fair share in that bound: more than the
//     bound over the number of identities holding anything;
//   - of those, an identity first seen within Bounds.NewFor (an hour) of
//     now before one known longer: first seen is the first declaration
//     or, for a provider, the first offer (Bounds.SeenSince), as this
//     node saw them;
//   - then the largest holder; then the identity first seen last; then
//     the greatest peer ID.
//
// When the view is over a bound, some holder is over its share (the
// holdings sum to more than the bound), so there is always one to take
// from, and a holder within its share never loses anything, however many
// identities come after it. The declaration that entered is its
// submitter's newest: a submitter first in line has it refused, not
// someone else's evicted, and so does one over its share whose holding,
// with it, would be no less than the first in line's in the same tier (a
// tie goes against the one who would take the room: otherwise identities
// at their share trade places at every re-announcement, evicting whole
// arrays to do it). A declaration larger than a bound on its own is
// refused outright. An honest submitter known for a while and holding
// its fair share is never evicted by a flood of fresh identities, which
// are evicted down to their share before any known holder loses a job;
// and an honest newcomer within its share is not either. This node's own
// jobs (Bounds.Self) are never evicted from its own view, which must
// match them to lease them.
//
// The gossip's validator asks the bounds first (Refuses): a declaration,
// or a requeue bringing one the view does not hold, from an identity that
// one job more would make first in line is ignored (p2p.ErrUnwanted)
// before the signatures a requeue carries are checked, and not passed
// on. A flood's identities, once over their share, then cost a peer a
// hash a declaration, not a signature check. A requeue that brings
// nothing new still passes: only an identity that keeps bringing what
// would be refused loses the re-announcements of what it holds, which
// then goes stale.
//
// An evicted job is closed in this view as Prune closes a job not
// re-announced: it is gone, so its submitter's next re-announcement
// (requeue) brings it back if there is room then; a job already leased
// or withdrawn keeps the mark Prune would leave, so a late copy does not
// open it. What was refused and evicted is counted (Bounded), and named
// by submitter once a pass (TakeEvictions).
//
// Every step is deterministic: two peers whose views hold the same
// messages, arrived in the same order, evict the same jobs. Peers whose
// messages arrived in different orders, or that saw an identity first at
// different times, or one that restarted, may hold different jobs of the
// holders over their share. Match then differs between them, which costs
// a round, never a double lease: a provider proposes only a job open in
// its own view, on GPUs it holds free, and the signed lease decides.
//
// Sizing (BenchmarkViewMemory, BenchmarkPassOverFlood): a single job held
// costs about 950 bytes of heap, a task 830, a byte of declaration 1 to
// 5.5 (5.5 for one shaped to cost the most: thousands of tiny env
// entries), and a pass between epochs some 4.6 µs of CPU a single job and
// 0.8 µs a task. At the defaults, 60,000 jobs and 8 MiB, a full view holds
// at most about 100 MiB of heap; twenty identities at their own bounds
// (10 arrays of 10,000 tasks and 10,000 single jobs each) leave one
// holding 47 MiB and a pass over it costing 0.1 s, where unbounded they
// made it hold 1.7 GiB and a pass cost 4 s. The pass is what sized the
// bound on jobs: at 150,000, a loaded two-core machine running three
// daemons spent its epochs walking the flood. An array larger than the
// bound on jobs is refused (market.MaxArrayTasks is larger): a network
// that runs such arrays raises the bound on every peer.
//
// Each view has its own lock, held only over memory. The one order
// between them: the Market's Current asks the epoch clock, which reads the
// Offers, with the Market's lock held; nothing calls into a Market with an
// Offers lock held.
package view
