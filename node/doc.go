// Package node is the E31 daemon: it wires the p2p host, the offer view, the
// market, the sandbox runner, the content store and the ledger together, and
// serves the local API that the e31 command uses.
//
// Data flows one way: p2p delivers signed messages, the node updates its
// view, market decides, and the node acts through exec, content and ledger.
// The node's own state lives in its data dir (see the README for the layout),
// so a restart picks up where it left off.
package node
