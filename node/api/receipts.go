package api

import "encoding/json"

// Receipts is the answer to a receipts query.
type Receipts struct {
	// Receipts is a JSON array of ledger receipts, in ledger order: those
	// both parties signed and one-sided records (which carry "signer").
	Receipts json.RawMessage `json:"receipts"`
	// Superseded lists the positions in Receipts of one-sided records that
	// a two-sided final receipt of their lease later settled. They stay in
	// the ledger, which is append-only, but no longer count.
	Superseded []int `json:"superseded,omitempty"`
	// Disputes are the ledger's disputes, in ledger order.
	Disputes []Dispute `json:"disputes,omitempty"`
	// Held sums, for the receipts of one job, what its leases held and
	// what is owed: the figures status and usage show.
	Held   *Held   `json:"held,omitempty"`
	Verify *Verify `json:"verify,omitempty"`
}

// Dispute is a lease whose parties signed different ends, both kept.
type Dispute struct {
	Index uint64 `json:"index"` // the dispute's entry in the ledger
	Lease string `json:"lease"`
	// Ours and Theirs are ledger receipts, each signed by one party: this
	// node's version of the end and the counterpart's.
	Ours   json.RawMessage `json:"ours"`
	Theirs json.RawMessage `json:"theirs"`
	// Superseded: a two-sided final receipt later settled the lease.
	Superseded bool `json:"superseded,omitempty"`
}

// Verify is the result of checking the ledger.
type Verify struct {
	Entries int `json:"entries"`
	// OneSided counts one-sided records no two-sided final receipt has
	// settled; Disputed, leases disputed and not settled since.
	OneSided int `json:"one_sided"`
	Disputed int `json:"disputed"`
	// Unbounded counts leases whose receipts no terms bound (signed
	// before held time was bounded by the lease): their held time is
	// not checked.
	Unbounded int    `json:"unbounded"`
	OK        bool   `json:"ok"`
	Problem   string `json:"problem,omitempty"`
}
