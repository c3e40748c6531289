// Package acl answers who may fetch which content from this node: a
// submitter's inputs go only to the providers it leased them to (or that
// its Match reserved for the job), a provider's output and checkpoints only
// to the job's submitter, and inputs a provider staged only to the other
// providers their submitter names (wire.ProtoRelay). The content
// exchange asks for every block a peer wants, so the answer comes from
// memory under a read lock and never waits on anything else.
package acl

import (
	"sync"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"
)

// List maps content roots to the peers that may fetch them. The zero value
// is not usable; call New.
type List struct {
	mu    sync.RWMutex                     // guards roots
	roots map[cid.Cid]map[peer.ID]struct{} // root -> peers allowed
}

// New returns an empty list: nobody may fetch anything.
func New() *List {
	return &List{roots: make(map[cid.Cid]map[peer.ID]struct{})}
}

// Allow lets p fetch root and every block under it.
func (l *List) Allow(p peer.ID, root cid.Cid) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.roots[root]
	if m == nil {
		m = make(map[peer.ID]struct{})
		l.roots[root] = m
	}
	m[p] = struct{}{}
}

// Allowed reports whether p may fetch root.
func (l *List) Allowed(p peer.ID, root cid.Cid) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	_, ok := l.roots[root][p]
	return ok
}

// Forget removes every grant on root.
func (l *List) Forget(root cid.Cid) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.roots, root)
}
