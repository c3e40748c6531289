// Package poll waits, in tests, for what peers and nodes do in their own
// time: a host to connect, a gossip mesh to form, a daemon to see an
// offer. Until polls a condition against a deadline and fails the test
// naming what it waited for, so that a test says what it expects to happen
// rather than how long to sleep.
package poll
