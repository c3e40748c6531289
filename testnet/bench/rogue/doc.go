// Package rogue plays every attack of issue 51 ("Strangers cannot cheat")
// against real daemons and says what each won, `go run ./testnet
// rogue-bench`: the cheating peers are testnet/byzantine/rogue's, the
// victims e31d processes on 127.0.0.1 (testnet/cluster).
//
// Two networks, each an honest submitter and two honest providers, hold
// most attacks between them, with honest jobs running beside, and a
// third the relay's:
//
//   - ProviderNet, where rogues play providers against the honest
//     submitter (ProviderAttacks): backdated and unassigned proposals,
//     receipts past the limit and after the final one, staging a job it
//     was not reserved, false completed and checkpoint_at, a checkpoint
//     flood, an offer with terminal escapes;
//   - SubmitterNet, where rogues play submitters against the honest
//     providers, and one a provider that squats on an honest gang's part
//     (SubmitterAttacks): a submitter that never countersigns, a gang
//     part squatted, a gang lease never sent;
//   - RelayNet, one daemon serving as a relay that carries data, where a
//     stranger and two rogue members abuse it (RelayAttacks): a
//     stranger's slot and circuit, bytes pushed between members with no
//     lease, and past a byte budget under a lease.
//
// Each rogue that needs a genuine lease is the only provider whose offer
// fits the job it goes after (a GPU model of its own), so that every
// Match assigns the job to it. An Outcome holds the attacks' Results with
// what the victims counted (e31_refused_total, e31_bytes_returned_total)
// and printed, and the honest jobs, for testnet/e2e's TestRogue tests to
// check; Report makes the table "attack | what happened". The view flood
// from many identities is measured elsewhere (testnet/byzantine/flood):
// its row says so.
package rogue
