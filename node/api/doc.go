// Package api is the local HTTP+JSON interface between the e31 command and
// its daemon: the request and response types, and a client for them.
//
// The API listens on a unix socket in the daemon's data dir by default, or on
// a loopback TCP address when asked, where every request carries the daemon's
// token (TokenFile, WithToken); it is never served on the p2p side.
// Every failure comes back as a JSON Error with an HTTP status, so the CLI can
// print why and exit non-zero.
package api
