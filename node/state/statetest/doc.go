// Package statetest holds an in-memory stand-in for state.Store, for tests
// of the roles (node/provider, node/submitter) that persist their records
// through it and need neither Badger nor a temp dir. It keeps records as
// the store does, as JSON in key order, so that a test reads back what a
// restart would.
package statetest
