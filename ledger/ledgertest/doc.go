// Package ledgertest signs receipts, one-sided records and disputes with
// keys derived from a seed, for tests of code that reads a ledger (the API
// server, the e31 command) and needs a real one in a temp dir. The ledger's
// own tests build theirs inside the package, with access to its internals.
package ledgertest
