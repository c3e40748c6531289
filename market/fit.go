package market

import (
	"cmp"
	"slices"
)

// The placement index. Offers whose shapes are equal (same devices in all,
// same free devices, CPUs and memory) form a class; classes sit in buckets
// by their number of free devices, each bucket sorted by free memory. Best
// fit (fewest devices left over, then least memory left over) is then the
// first feasible class met when walking buckets upward from the job's
// device count and, inside a bucket, upward from its memory: the walk tests
// classes, a few hundred at most, never the ten thousand offers behind them.
// Inside a class the rendezvous trie picks the provider.

type classKey struct {
	static int32
	avail  int32
	cpus   int64
	mem    uint64
	// failures keeps providers named in different numbers of avoid lists
	// in different classes, so that best fit can rank them (fitKey).
	failures int32
}

type class struct {
	shape
	key   classKey
	count int // providers in the class
	// A small class lists its providers; a large one keeps them in a trie.
	// Most classes are small (a partly used machine is rarely in the same
	// state as many others), and scanning a few is cheaper than walking
	// trie levels.
	members []int32
	root    int32 // 0 while small
}

// smallClass is the size past which a class moves its providers to a trie.
const smallClass = 32

// index holds every provider that ordinary placement may use: all but the
// reserved ones.
type index struct {
	arena   *trieArena
	classes map[classKey]*class
	buckets [][]*class // by free device count, each sorted by compareClass
}

func newIndex(arena *trieArena, maxGPUs int) *index {
	return &index{
		arena:   arena,
		classes: make(map[classKey]*class),
		buckets: make([][]*class, maxGPUs+1),
	}
}

func keyOf(s *shape) classKey {
	return classKey{static: s.static.id, avail: s.avail.id, cpus: s.cpus, mem: s.mem}
}

// compareClass orders a bucket by free memory; the rest of the key only
// makes the order total, so that it never depends on insertion order.
func compareClass(a, b *class) int {
	if c := cmp.Compare(a.mem, b.mem); c != 0 {
		return c
	}
	if c := cmp.Compare(a.key.static, b.key.static); c != 0 {
		return c
	}
	if c := cmp.Compare(a.key.avail, b.key.avail); c != 0 {
		return c
	}
	if c := cmp.Compare(a.key.cpus, b.key.cpus); c != 0 {
		return c
	}
	return cmp.Compare(a.key.failures, b.key.failures)
}

func (ix *index) add(p *provider) {
	k := keyOf(&p.shape)
	k.failures = p.failures
	c, ok := ix.classes[k]
	if !ok {
		c = &class{shape: p.shape, key: k}
		ix.classes[k] = c
		b := ix.buckets[c.avail.total]
		i, _ := slices.BinarySearchFunc(b, c, compareClass)
		ix.buckets[c.avail.total] = slices.Insert(b, i, c)
	}
	switch {
	case c.root != 0:
		ix.arena.insert(c.root, p.idx)
	case len(c.members) < smallClass:
		c.members = append(c.members, p.idx)
	default:
		c.root = ix.arena.newRoot()
		for _, q := range c.members {
			ix.arena.insert(c.root, q)
		}
		c.members = nil
		ix.arena.insert(c.root, p.idx)
	}
	c.count++
	p.class = c
}

func (ix *index) remove(p *provider) {
	c := p.class
	p.class = nil
	if c.root != 0 {
		ix.arena.remove(c.root, p.idx)
	} else if i := slices.Index(c.members, p.idx); i >= 0 {
		last := len(c.members) - 1
		c.members[i] = c.members[last]
		c.members = c.members[:last]
	}
	c.count--
	if c.count > 0 {
		return
	}
	delete(ix.classes, c.key)
	if c.root != 0 {
		ix.arena.releaseRoot(c.root)
	}
	b := ix.buckets[c.avail.total]
	if i, found := slices.BinarySearchFunc(b, c, compareClass); found {
		ix.buckets[c.avail.total] = slices.Delete(b, i, i+1)
	}
}

// nearest returns the provider of c with the smallest rendezvous weight for
// key, ties by provider number, with its weight. c must not be empty.
func (ix *index) nearest(c *class, key uint64) (int32, uint64) {
	if c.root != 0 {
		return ix.arena.nearest(c.root, key)
	}
	best, bestW := int32(-1), uint64(0)
	for _, q := range c.members {
		w := ix.arena.hash[q] ^ key
		if best == -1 || w < bestW || w == bestW && q < best {
			best, bestW = q, w
		}
	}
	return best, bestW
}

// fitKey is what best fit minimizes, before the rendezvous weight. Of
// places that fit alike, the cheaper wins; a provider that more
// submitters name in avoid lists loses ties of fit and price.
type fitKey struct {
	gpusLeft int
	memLeft  uint64
	price    Price
	failures int32
}

func (a fitKey) compare(b fitKey) int {
	if c := cmp.Compare(a.gpusLeft, b.gpusLeft); c != 0 {
		return c
	}
	if c := cmp.Compare(a.memLeft, b.memLeft); c != 0 {
		return c
	}
	if c := cmp.Compare(a.price, b.price); c != 0 {
		return c
	}
	return cmp.Compare(a.failures, b.failures)
}

// bestFit returns the classes tied for the best fit of d, appended to ties,
// or none when no class in the index can take d now.
func (ix *index) bestFit(d *demand, fs *[numFilters]namedFilter, ties []*class) []*class {
	for g := d.gpus; g < len(ix.buckets); g++ {
		b := ix.buckets[g]
		i, _ := slices.BinarySearchFunc(b, d.mem, func(c *class, m uint64) int { return cmp.Compare(c.mem, m) })
		found := false
		var mem uint64
		for ; i < len(b); i++ {
			c := b[i]
			if found && c.mem != mem {
				break
			}
			if firstFailure(fs, d, &c.shape) == "" {
				found, mem = true, c.mem
				ties = append(ties, c)
			}
		}
		if found {
			return ties
		}
	}
	return ties
}
