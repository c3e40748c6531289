// Package jobstate names where a job stands and the steps it passes
// through: the words of the domain, which the submitter decides on, the
// peer protocol carries (node/wire) and the local API shows (node/api,
// under the same names, by alias).
//
// It holds names alone, with their order and what each implies; how a
// lease ended is the ledger's (ledger.Outcome, ledger.Attribution).
package jobstate
