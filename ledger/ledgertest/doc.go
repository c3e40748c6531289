// Package ledgertest signs receipts, one-sided records and disputes with
// keys derived from a seed, for tests of code that reads a ledger (the API
// server, the e31 command) and needs a real one in a temp dir. The ledger's
// own tests build theirs inside the package, with access to its internals.
//
// Memory is a ledger in memory for tests of the roles (node/provider,
// node/submitter), which store receipts and read them back but need
// neither the real ledger's signature checks nor its hash chain.
package ledgertest
