package market

import "math/bits"

// The tie-break between equally good providers for a job is a rendezvous
// weight: the provider p with the smallest h(p) XOR h(job), where h is
// H(seed ‖ name). Like highest-random-weight hashing, every (job, provider)
// pair has its own weight, so ties spread over providers instead of piling
// onto one, and removing a provider only moves the jobs that chose it. Unlike
// hashing every pair, the XOR form (Kademlia's distance) can be minimized
// with a bit trie in a fixed number of steps, which matters when ten thousand
// identical providers tie for each of a hundred thousand jobs.

// maxTrieBits bounds how many leading bits of the provider hash a trie
// branches on. Below its depth the providers sharing a prefix sit in a
// chain and are compared on the full 64 bits, which gives the same answer
// as a 64-level trie with far fewer nodes to walk. The depth is set per
// Match from the number of providers, ⌈log₂ n⌉ levels: a class of n
// providers then has less than one per leaf on average, and every level
// more would be a node visit, a likely cache miss, for each placement.
const maxTrieBits = 24

type trieNode struct {
	child [2]int32 // 0 is no child
	count int32    // providers below
	head  int32    // at a leaf, the first provider of the chain; -1 for none
}

// trieArena holds the tries of every class of one Match call in one slice,
// so that building and tearing them down costs no allocation per node.
type trieArena struct {
	nodes []trieNode
	free  []int32
	hash  []uint64 // per provider
	next  []int32  // per provider: the next in its leaf chain, -1 at the end
	depth int      // levels of every trie, at most maxTrieBits
}

func newTrieArena(hashes []uint64) *trieArena {
	a := &trieArena{
		// Node 0 is the null node. A trie of n providers at depth ⌈log₂ n⌉
		// has about 2n nodes.
		nodes: make([]trieNode, 1, 1+3*len(hashes)),
		hash:  hashes,
		next:  make([]int32, len(hashes)),
		depth: min(max(bits.Len(uint(len(hashes))), 1), maxTrieBits),
	}
	return a
}

func (a *trieArena) alloc() int32 {
	if n := len(a.free); n > 0 {
		id := a.free[n-1]
		a.free = a.free[:n-1]
		a.nodes[id] = trieNode{head: -1}
		return id
	}
	a.nodes = append(a.nodes, trieNode{head: -1})
	return int32(len(a.nodes) - 1)
}

func (a *trieArena) newRoot() int32 { return a.alloc() }

// releaseRoot returns the root of an empty trie to the free list.
func (a *trieArena) releaseRoot(root int32) { a.free = append(a.free, root) }

func bitAt(h uint64, depth int) int { return int(h>>(63-depth)) & 1 }

func (a *trieArena) insert(root, p int32) {
	h := a.hash[p]
	n := root
	a.nodes[n].count++
	for d := range a.depth {
		b := bitAt(h, d)
		c := a.nodes[n].child[b]
		if c == 0 {
			c = a.alloc()
			a.nodes[n].child[b] = c
		}
		n = c
		a.nodes[n].count++
	}
	a.next[p] = a.nodes[n].head
	a.nodes[n].head = p
}

func (a *trieArena) remove(root, p int32) {
	h := a.hash[p]
	var path [maxTrieBits + 1]int32
	path[0] = root
	n := root
	for d := range a.depth {
		n = a.nodes[n].child[bitAt(h, d)]
		path[d+1] = n
	}
	// Unlink p from the leaf chain.
	prev := int32(-1)
	for q := a.nodes[n].head; q != -1; q = a.next[q] {
		if q == p {
			if prev == -1 {
				a.nodes[n].head = a.next[q]
			} else {
				a.next[prev] = a.next[q]
			}
			break
		}
		prev = q
	}
	for _, id := range path {
		a.nodes[id].count--
	}
	// Cut the highest branch left empty and recycle it.
	for d := 1; d <= a.depth; d++ {
		if a.nodes[path[d]].count == 0 {
			a.nodes[path[d-1]].child[bitAt(h, d-1)] = 0
			a.free = append(a.free, path[d:a.depth+1]...)
			break
		}
	}
}

// nearest returns the provider with the smallest hash XOR key, ties by the
// lower provider number (its place in the sorted offers), with its weight.
// The trie must not be empty.
func (a *trieArena) nearest(root int32, key uint64) (int32, uint64) {
	n := root
	for d := range a.depth {
		b := bitAt(key, d)
		c := a.nodes[n].child[b]
		if c == 0 {
			c = a.nodes[n].child[1-b]
		}
		n = c
	}
	best, bestW := int32(-1), uint64(0)
	for q := a.nodes[n].head; q != -1; q = a.next[q] {
		w := a.hash[q] ^ key
		if best == -1 || w < bestW || (w == bestW && q < best) {
			best, bestW = q, w
		}
	}
	return best, bestW
}
