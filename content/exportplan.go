package content

import (
	"context"
	"fmt"
	"math"

	dag "github.com/ipfs/boxo/ipld/merkledag"
	ft "github.com/ipfs/boxo/ipld/unixfs"
	"github.com/ipfs/go-cid"
	ipld "github.com/ipfs/go-ipld-format"
)

// subtree is what a node of a DAG amounts to once exported.
type subtree struct {
	dir     bool
	entries int64 // files, folders and symlinks below it
	bytes   int64 // file content
	// height is, for a folder, the folder levels below it (0 for a
	// folder of files) and, for a file node, the links from it down to
	// its deepest leaf.
	height int
}

// planFrame is a folder or file node whose children planExport is still
// counting.
type planFrame struct {
	c   cid.Cid
	sum subtree

	// A folder: its entries and its depth below the export's root.
	dir   *dirIter
	depth int

	// A file node: its links, the content size it states for each, the
	// next one to take and its distance from the file's root.
	links []*ipld.Link
	sizes []uint64
	next  int
	level int
}

// planExport counts, before anything is written, what exporting the DAG
// under root would write, and fails as soon as a count passes lim: the DAG
// comes from another peer and a few MB of blocks can describe a TiB of
// files, a million entries or folders nested without end.
//
// It walks with a stack of its own, so no nesting can grow the goroutine
// stack, and remembers each node it has counted, so a DAG that links the
// same subtree a million times is counted in the time its distinct blocks
// take to read. Only dag-pb nodes are read; raw leaves are counted by the
// size the store holds for them.
//
// A file node's sizes are checked against its children: every child must
// hold the bytes its parent states for it, and a node's stated size must be
// its own data plus its children's. A DAG that fails that is refused with
// ErrInvalidData. So the byte count is exact, not a claim, and a file is
// refused before any of it is written. The stated size is also used as a
// claim up front, to refuse a file over the cap without reading its
// structure.
func (s *Store) planExport(ctx context.Context, root cid.Cid, lim Limits) (tally, error) {
	p := exportPlanner{s: s, t: tally{lim: lim}, memo: map[cid.Cid]subtree{}}
	st, err := p.run(ctx, root)
	if err == nil && !st.dir {
		// A file at the root is an entry; a folder at the root is not.
		err = p.t.addEntries(1)
	}
	return p.t, err
}

type exportPlanner struct {
	s     *Store
	t     tally
	memo  map[cid.Cid]subtree // dag-pb nodes counted so far
	stack []*planFrame
}

func (p *exportPlanner) run(ctx context.Context, root cid.Cid) (subtree, error) {
	st, done, err := p.open(ctx, root, 0, -1)
	if err != nil || done {
		return st, err
	}
	for {
		if err := ctx.Err(); err != nil {
			return subtree{}, err
		}
		f := p.stack[len(p.stack)-1]
		var (
			c    cid.Cid
			more bool
		)
		if f.dir != nil {
			var name string
			name, c, more, err = f.dir.next()
			if err != nil {
				return subtree{}, fmt.Errorf("directory %s: %w", f.c, err)
			}
			if more {
				if err := checkName(f.c.String(), name); err != nil {
					return subtree{}, err
				}
				if err := p.t.addEntries(1); err != nil {
					return subtree{}, err
				}
				f.sum.entries++
				st, done, err = p.open(ctx, c, f.depth+1, -1)
			}
		} else if f.next < len(f.links) {
			more = true
			c = f.links[f.next].Cid
			f.next++
			st, done, err = p.open(ctx, c, 0, f.level+1)
		}
		if err != nil {
			return subtree{}, err
		}
		if !more {
			// f is counted: pop it and add it to its parent.
			p.stack = p.stack[:len(p.stack)-1]
			st = f.sum
			p.memo[f.c] = st
			if len(p.stack) == 0 {
				return st, nil
			}
			done = true
		}
		if done {
			if err := p.merge(p.stack[len(p.stack)-1], st); err != nil {
				return subtree{}, err
			}
		}
	}
}

// open counts node c, a folder at depth (level < 0) or a file node level
// links below its file's root. It returns the node's subtree when that is
// known at once (a raw leaf, a symlink, a node seen before); otherwise it
// pushes a frame for the node's children and returns done false.
func (p *exportPlanner) open(ctx context.Context, c cid.Cid, depth, level int) (st subtree, done bool, err error) {
	inFile := level >= 0
	if level > maxFileLevels {
		return st, false, fmt.Errorf("%w: file DAG nested deeper than %d levels at %s", ErrInvalidData, maxFileLevels, c)
	}
	if c.Type() == cid.Raw {
		size, held, err := p.s.blockSize(c)
		if err != nil {
			return st, false, err
		}
		if !held {
			return st, false, fmt.Errorf("%w: block %s", ErrNotFound, c)
		}
		st.bytes = int64(size)
		return st, true, p.t.addBytes(st.bytes)
	}
	if m, ok := p.memo[c]; ok {
		// Seen before, maybe at another depth: check where it lands now.
		switch {
		case m.dir && inFile:
			return st, false, fmt.Errorf("%w: directory %s inside a file", ErrInvalidData, c)
		case m.dir:
			if err := p.t.checkDepth(depth + m.height); err != nil {
				return st, false, err
			}
		case inFile && level+m.height > maxFileLevels:
			return st, false, fmt.Errorf("%w: file DAG nested deeper than %d levels at %s", ErrInvalidData, maxFileLevels, c)
		}
		if err := p.t.addEntries(m.entries); err != nil {
			return st, false, err
		}
		return m, true, p.t.addBytes(m.bytes)
	}
	nd, err := p.s.node(c)
	if err != nil {
		return st, false, err
	}
	kind, _, _, err := inspect(nd)
	if err != nil {
		return st, false, err
	}
	if inFile && kind != kindFile {
		return st, false, fmt.Errorf("%w: node %s inside a file is not file data", ErrInvalidData, c)
	}
	switch kind {
	case kindSymlink:
		return st, true, nil
	case kindDir:
		if err := p.t.checkDepth(depth); err != nil {
			return st, false, err
		}
		it, err := newDirIter(ctx, p.s, nd)
		if err != nil {
			return st, false, err
		}
		p.stack = append(p.stack, &planFrame{c: c, sum: subtree{dir: true}, dir: it, depth: depth})
		return st, false, nil
	}
	if !inFile {
		level = 0
	}
	f, err := p.fileFrame(nd, level)
	if err != nil {
		return st, false, err
	}
	p.stack = append(p.stack, f)
	return st, false, p.t.addBytes(f.sum.bytes)
}

// fileFrame checks a dag-pb file node's own sizes: as many sizes as
// links, and a stated total that is its data plus those sizes. Its
// children are checked against the sizes as they are counted.
func (p *exportPlanner) fileFrame(nd ipld.Node, level int) (*planFrame, error) {
	pn := nd.(*dag.ProtoNode) // inspect said kindFile, and raw nodes never reach here
	fsn, err := ft.FSNodeFromBytes(pn.Data())
	if err != nil {
		return nil, fmt.Errorf("%w: node %s is not UnixFS: %v", ErrInvalidData, nd.Cid(), err)
	}
	sizes, links := fsn.BlockSizes(), pn.Links()
	if len(sizes) != len(links) {
		return nil, fmt.Errorf("%w: file node %s has %d links but %d sizes", ErrInvalidData, nd.Cid(), len(links), len(sizes))
	}
	claim := fsn.FileSize()
	sum := uint64(len(fsn.Data()))
	for _, n := range sizes {
		if sum+n < sum {
			return nil, fmt.Errorf("%w: file node %s states sizes that overflow", ErrInvalidData, nd.Cid())
		}
		sum += n
	}
	if claim > math.MaxInt64 || sum != claim {
		return nil, fmt.Errorf("%w: file node %s declares %d bytes but its parts state %d", ErrInvalidData, nd.Cid(), claim, sum)
	}
	// The claim is true or the DAG is refused below; either way a claim
	// over the cap need not be read further.
	if err := p.t.wouldExceedBytes(int64(claim)); err != nil {
		return nil, err
	}
	return &planFrame{c: nd.Cid(), sum: subtree{bytes: int64(len(fsn.Data()))}, links: links, sizes: sizes, level: level}, nil
}

// merge adds child st, just counted, to frame f.
func (p *exportPlanner) merge(f *planFrame, st subtree) error {
	if f.dir != nil {
		f.sum.entries = addSat(f.sum.entries, st.entries)
		f.sum.bytes = addSat(f.sum.bytes, st.bytes)
		if st.dir {
			f.sum.height = max(f.sum.height, st.height+1)
		}
		return nil
	}
	i := f.next - 1
	if uint64(st.bytes) != f.sizes[i] {
		return fmt.Errorf("%w: file node %s states %d bytes for link %d, which holds %d", ErrInvalidData, f.c, f.sizes[i], i, st.bytes)
	}
	f.sum.bytes = addSat(f.sum.bytes, st.bytes)
	f.sum.height = max(f.sum.height, st.height+1)
	return nil
}
