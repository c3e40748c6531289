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
//   - node/acl: who may fetch which content, answered from memory;
//   - node/state: the Badger store of the roles' own records;
//   - node/apiserver: the local HTTP API, errors mapped to statuses there;
//   - node/task: goroutines that stop, with a bound, when their owner does.
//
// This package only wires them and runs the loops that feed them (gossip in
// and out, the epoch's Match). Its state is a node's data dir (see the
// README for the layout), so a restart picks up where it left off.
package node
