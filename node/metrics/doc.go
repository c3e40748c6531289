// Package metrics is a node's Prometheus registry: every e31_ series the
// daemon serves on its metrics address (node.Config.Metrics), with the
// profiles beside them.
//
// The series live in a registry of the node's own, not the process's
// default, so that several nodes can share a process (tests). The roles
// count into the counters handed to them (provider.Metrics,
// submitter.Metrics); the rest are read from the node's parts when scraped
// (Register), each from memory: no scrape waits on a disk or a peer.
//
// e31_panics_total{where} counts the panics recovered at a boundary of the
// daemon. Its label values are few and fixed, never a peer's or a
// protocol's name, and all exist from the start at 0, so that an alert on
// an increase sees the first panic: those the packages the node wires
// export (p2p, content, apiserver, node/epoch), and the node's own here
// (PanicGossipHandle, PanicTask, PanicLease).
package metrics
