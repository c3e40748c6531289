// Package epoch measures how many matching rounds a network loses
// because its peers' views of an epoch differ, over links with WAN latency,
// with the epoch delay fixed (the node before) and adaptive (the node now).
//
// # What a lost round is
//
// Every peer runs Match once an epoch on its own view, cut at the epoch's
// start minus the epoch delay, and a provider proposes only what its own
// Match gave it (market/doc.go, "Claims"). A round is lost when, in epoch
// e, the submitter's own Match assigned its job to a provider — the
// submitter's status says "matched to provider P; waiting for its
// proposal" — and no proposal made in e or before was accepted for the
// job: it waits at least one more epoch although the submitter's view had
// room for it. The table splits lost rounds by cause:
//
//   - split: the provider's own Match did not give it the job (its view or
//     its delay differed from the submitter's);
//   - busy: it did, on devices the provider already held for another job
//     (the view did not yet hold the lease that took them);
//   - stale: it did, but the job was already closed in what the provider
//     had received.
//
// "Declined" counts proposals the submitter refused because it had accepted
// another for the same job: no round lost, a round trip wasted. A job that
// is declared after an epoch's cutoff is not a lost round (no peer's view
// held it); that cost of a longer delay shows in "to lease", the mean time
// from declaration to accepted proposal.
//
// # How it runs
//
// [Run] builds, in one process, 4 providers (GPUs enough for every job, so
// only views, never room, decide) and 2 submitters with real libp2p hosts
// on 127.0.0.1, each pair joined through a delay line that holds every byte
// for a fixed one-way latency (delayline.go). go-libp2p's mocknet has a
// Latency option, but its streams carry one write per latency, so a busy
// gossip stream queues and the queue, not the latency, is measured; and the
// kernel here has no netem. On them run the real pieces of a node that
// decide what each peer sees: gossipsub through p2p.Gossip, the offer and
// market views of node/view with their epoch cut, the gossip delay window,
// and the node's own epoch loop (node/epoch: Loop, with the node's delay
// rule, runs market.Match at every epoch's start and carries out the result
// with epoch.Carry, in its order). Only Carry's Actions are the benchmark's
// (benchActions, peer.go): a provider claims as the node's does: it holds
// the devices, sends a proposal over a direct stream (p2p.Call), and
// announces the lease and its changed offer once the submitter accepted;
// the submitter accepts one proposal per job. Signatures on leases, inputs
// and the run itself are left out: they do not change who sees what when.
// Submitters declare jobs at uniformly random instants, 20 a second.
//
// Gossip delays here are real ones, measured on the receiving peer as the
// node measures them, so they include this machine's load: the table shows
// how late a 10ms timer fired, and a loaded machine makes every mode lose
// more. Compare modes within one table, run on an idle machine.
//
// # What it showed
//
// Measured here (2 shared cores, timers 2–50ms late at p99; 300 jobs, 3
// seeds; lost rounds per 100 jobs, before → after): 50ms one-way 5.7 →
// 0.3, 150ms 16.7 → 0.0, 300ms 44.2 → 20.1 with 1s epochs and 23.3 → 0.0
// with 2s epochs. Gossip's median delay is the link's latency; its p99 is
// 1.1–2 times that on a quiet machine and up to 7 times under load (timers
// 60–240ms late), and the adaptive delay follows the p99 up to its ceiling,
// half an epoch: load is why it reached 500ms at 50ms latency in a run on a
// busy machine. At 300ms with 1s epochs the delay sits at the ceiling,
// below gossip's tail, and a claim's round trip is longer than the other
// half, so the lease of an epoch's claim misses the next epoch's view,
// which places the job again: declined proposals and devices found held
// (market/doc.go, "The epoch's view"). Longer epochs fix both.
//
// It is a measurement (go run ./testnet epoch-bench, which runs [Compare]);
// the package's test runs on request only (E31_EPOCH_BENCH=1) and checks
// orders, not figures.
package epoch
