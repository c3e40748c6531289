// Package node is the E31 daemon: it wires the p2p host, the views, the
// market, the sandbox runner, the content store and the ledger to the two
// roles a node plays, and serves the local API that the e31 command uses.
//
// Data flows one way: p2p delivers signed messages, the node updates its
// views (node/view), market decides, and the roles act through exec,
// content and ledger. Where each concept lives:
//
//   - node/wire: what peers say to each other (message bodies, the signed
//     lease, direct-stream requests, refusal codes) and the stateless checks;
//   - node/view: the offers and the jobs topic as this node has seen them;
//   - node/provider: a lease from proposal to settlement, on the provider;
//   - node/submitter: a job from submit to its final receipt, on the
//     submitter;
//   - node/epoch: the epoch's Match and the pass between epochs, and the
//     one place a Match result is carried out, in a stated order (Carry);
//   - node/compute: the GPUs this machine has and the sandbox jobs run in;
//   - node/offer: what this node offers and when it publishes the offer;
//   - node/reach: NAT traversal, how this node is reached and reaches its
//     peers, and their addresses across restarts;
//   - node/metrics: the Prometheus series and the metrics endpoint;
//   - node/acl: who may fetch which content, answered from memory;
//   - node/state: the Badger store of the roles' own records;
//   - node/api: the types of the local API, shared with the e31 command;
//   - node/apiserver: the local HTTP API, errors mapped to statuses there;
//   - node/images: the library of job images in the content store;
//   - node/joblog: a job's stdout or stderr, read as it is written;
//   - node/rawcontent: a hostile submitter, for tests (Config.RawContent),
//     built only with the byzantine tag;
//   - node/task: goroutines that stop, with a bound, when their owner does.
//
// This package only wires them (New, roles.go, match.go), runs them (Run,
// then shutdown, run.go) and applies what gossip brings to the views and
// the roles (feed.go, feed_jobs.go). Its state is a node's data dir (see the README for
// the layout), so a restart picks up where it left off.
//
// # Panics
//
// No input from a peer may end the daemon. A panic in one unit of work is
// recovered at that unit's boundary, as net/http does per request, and only
// that unit fails: a stream request (p2p.Serve answers "internal error",
// p2p.CodeInternal), a gossip message being validated (ignored) or applied
// to the view (dropped), a bulk request or bitswap want (content), an
// epoch's Match or a pass between epochs (node/epoch), a lease
// (node/provider), an API request (500). Each is logged at error level as
// "panic recovered" with where, the panic and its stack, and counted in
// e31_panics_total{where}, whose few fixed label values all exist from the
// start (node/metrics). It is a safety net for bugs, never a way to refuse
// anything: testnet/cluster's Panics finds them in a daemon's log, and every
// end-to-end test fails on one.
//
// # Providers that fail jobs
//
// A provider may follow the wire format and still not serve: squat on the
// jobs Match gives it, sign a lease and never run it, fall silent after the
// lease, or withhold its receipts. The submitter is the one that sees it,
// and it answers with signed facts every peer can use (node/submitter,
// avoid.go, for the bounds, all derived from the epoch, the proposal TTL,
// the receipt interval and the receipt timeout):
//
//   - the job is re-announced (a requeue, node/wire) with the provider in
//     its avoid list, which is part of every peer's view, so every Match
//     skips the provider for that job (market, "Avoided providers");
//   - a lease that never reached its run is released by the submitter,
//     signed and marked requeued: peers put its GPUs back and hold the job
//     open for its next announcement, the provider stops the lease, and
//     the submitter's one-sided record holds only what it countersigned;
//   - across jobs, Match ranks a provider by the number of distinct
//     submitters that name it in the view's avoid lists.
//
// A provider may also lie about what it has and what it did. One that
// offers GPUs it lacks is caught before the run by the GPU probe: the
// submitter compares the probe's result from the sandbox with the offer,
// and a mismatch ends the lease failed by the provider ("gpu probe
// failed: ..."), nothing owed, the job requeued avoiding it
// (node/submitter probe.go). One that returns an output it did not
// compute (a byte changed, an empty folder) is for the submitter's
// verification of results to catch.
//
// A provider can be made to misbehave in these ways, for tests only, by a
// daemon built with the byzantine tag (cmd/e31d, Config.Misbehave: squat,
// no-run, silent, withhold-receipt, fake-model, wrong-output, no-work);
// the end-to-end suite runs them as TestByzantine… and TestProbe… in
// testnet/e2e.
package node
