// Package reclaim gives a provider's machine back to its owner as soon as
// the owner starts using a GPU, and takes work again once the owner has
// stopped for a while (e31d --reclaim-on-use).
//
// A [Watcher] samples the machine's GPUs every Interval (2s) through a
// [Source]: exec/nvidia's UseReader for real GPUs, exec.SimUse for
// simulated ones marked busy by a file. The owner is using the machine
// when a sample shows
//
//   - on any GPU, a process that no job sandbox holds (exec.IsSandboxPID:
//     its cgroup is not under the runners' /e31), or
//   - on a GPU that no lease holds, utilisation above Threshold (10%). A
//     leased GPU's utilisation is its job's, whoever else is on it; that
//     is why the first rule looks at processes. A GPU counts as unleased
//     only once it was unleased at the sample before too: NVML averages
//     utilisation over up to a second, and a job that just ended would
//     otherwise look like the owner.
//
// At the first such sample the watcher asks the [Provider] to Reclaim the
// node, saying why ("owner started using GPU 0 (pid 4242)"): a quick
// drain, in which each run writes a last checkpoint and moves elsewhere.
// Once no sample has shown owner use for IdleFor (10 minutes), it asks the
// provider to Return the node: lift that drain, and only that drain. A
// drain the owner set with e31 drain stays, which the provider, not the
// watcher, knows how to tell apart; the watcher may therefore call Return
// when no drain of its own is left (the owner undrained by hand, or took
// the drain over with e31 drain).
//
// A sample that fails is logged and decides nothing: it neither reclaims
// nor counts towards the quiet that returns the node, so a source that
// stops working leaves the node as it was.
//
// Time is the standard library's: the tests run the watcher in a
// testing/synctest bubble, where its ticker is instant and deterministic.
package reclaim
