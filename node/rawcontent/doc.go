//go:build byzantine

// Package rawcontent makes a node a hostile submitter, for tests
// (node.Config.RawContent).
//
// A real attacker runs a modified daemon and puts on the network DAGs that
// no honest import makes. The byzantine build of e31d plays one with
// --misbehave raw-content: POST /v1/debug/car stores a CAR's blocks as
// they are and pins its roots under Pin, complete or not (PutCAR), and the
// submitter is handed a store (Store) and an image library (Images) that
// take such a root where the honest ones would refuse it: an incomplete DAG
// is pinned for a job anyway, and a work.image CID that is no valid image
// is named in the declaration as it is. The submitter's own code is
// unchanged; only what it is wired to differs, and only for roots that came
// in through the debug CAR, so the rest of the node behaves.
//
// The package builds only with the byzantine tag, as the daemons of
// testnet/cluster are built: a default build has neither the route nor
// this code.
package rawcontent
