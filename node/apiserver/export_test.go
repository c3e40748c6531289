package apiserver

import "time"

// WithPeerCred is cfg with its unix socket's callers said to be who cred
// says: how a test plays another user than the one it runs as.
func WithPeerCred(cfg Config, cred PeerCred) Config {
	cfg.peerCred = cred
	return cfg
}

// SetClock makes a read the time from now: how a test lets a one-time
// link expire. It is set before a is used.
func (a *Access) SetClock(now func() time.Time) { a.now = now }
