package content

import (
	"context"
	"fmt"
	"math/bits"

	dag "github.com/ipfs/boxo/ipld/merkledag"
	ft "github.com/ipfs/boxo/ipld/unixfs"
	"github.com/ipfs/boxo/ipld/unixfs/hamt"
	"github.com/ipfs/go-cid"
	ipld "github.com/ipfs/go-ipld-format"
)

// dirIter lists the entries of a UnixFS directory node, plain or
// HAMT-sharded, in the order boxo's ForEachLink gives them. It walks the
// shards with a stack of its own instead of boxo's recursion, and holds
// only the links of the shards on its path instead of boxo's cache of the
// whole trie: a hostile directory can have a million entries or shards
// nested without end, and neither may grow the goroutine stack or keep the
// directory in memory.
type dirIter struct {
	ctx   context.Context
	s     *Store
	stack []shardLevel
	// shards are the sub-shards listed so far. Boxo never links one shard
	// from two places, and a DAG that does can make a few blocks list as
	// 8^20 shards: a shard seen twice is refused, so a listing costs no
	// more than the directory's distinct blocks.
	shards map[cid.Cid]bool
}

// shardLevel is one node on the path from the directory to the current
// entry: the links still to list and how to read their names.
type shardLevel struct {
	links []*ipld.Link
	// pad is the length of the hex prefix a HAMT gives each link name
	// (0 for a plain directory); a link whose name is only the prefix
	// is a sub-shard.
	pad int
	// bits are the hash bits the shards down to this one take.
	bits int
}

// newDirIter starts listing directory node nd.
func newDirIter(ctx context.Context, s *Store, nd ipld.Node) (*dirIter, error) {
	pn, ok := nd.(*dag.ProtoNode)
	if !ok {
		return nil, fmt.Errorf("%w: directory %s is not dag-pb", ErrInvalidData, nd.Cid())
	}
	fsn, err := ft.FSNodeFromBytes(pn.Data())
	if err != nil {
		return nil, fmt.Errorf("%w: node %s is not UnixFS: %v", ErrInvalidData, nd.Cid(), err)
	}
	it := &dirIter{ctx: ctx, s: s}
	switch fsn.Type() {
	case ft.TDirectory:
		it.stack = append(it.stack, shardLevel{links: pn.Links()})
	case ft.THAMTShard:
		lv, err := shardOf(pn, fsn, 0)
		if err != nil {
			return nil, err
		}
		it.stack = append(it.stack, lv)
	default:
		return nil, fmt.Errorf("%w: node %s of type %s is not a directory", ErrInvalidData, nd.Cid(), fsn.Type())
	}
	return it, nil
}

// shardOf checks HAMT shard pn the way boxo's NewHamtFromDag does, and
// that the shards above it left it hash bits to use.
func shardOf(pn *dag.ProtoNode, fsn *ft.FSNode, above int) (shardLevel, error) {
	if fsn.HashType() != hamt.HashMurmur3 {
		return shardLevel{}, fmt.Errorf("%w: HAMT shard %s hashes with %#x, not murmur3", ErrUnsupported, pn.Cid(), fsn.HashType())
	}
	fanout := fsn.Fanout()
	// Boxo's limits: a power of two of whole bytes of bitfield, at most
	// 1024 wide.
	if fanout < 8 || fanout > 1024 || bits.OnesCount64(fanout) != 1 {
		return shardLevel{}, fmt.Errorf("%w: HAMT shard %s has fanout %d", ErrInvalidData, pn.Cid(), fanout)
	}
	if uint64(len(fsn.Data())) > fanout/8 {
		return shardLevel{}, fmt.Errorf("%w: HAMT shard %s has a bitfield wider than its fanout", ErrInvalidData, pn.Cid())
	}
	used := above + bits.TrailingZeros64(fanout)
	if used > maxShardBits {
		return shardLevel{}, fmt.Errorf("%w: HAMT shards under %s nest deeper than a %d-bit hash reaches", ErrInvalidData, pn.Cid(), maxShardBits)
	}
	return shardLevel{links: pn.Links(), pad: len(fmt.Sprintf("%X", fanout-1)), bits: used}, nil
}

// next returns the next entry's name and CID; ok is false when there are
// no more.
func (it *dirIter) next() (name string, c cid.Cid, ok bool, err error) {
	for len(it.stack) > 0 {
		if err := it.ctx.Err(); err != nil {
			return "", cid.Undef, false, err
		}
		top := &it.stack[len(it.stack)-1]
		if len(top.links) == 0 {
			it.stack = it.stack[:len(it.stack)-1]
			continue
		}
		l := top.links[0]
		top.links = top.links[1:]
		switch {
		case top.pad == 0:
			return l.Name, l.Cid, true, nil
		case len(l.Name) > top.pad:
			return l.Name[top.pad:], l.Cid, true, nil
		case len(l.Name) < top.pad:
			return "", cid.Undef, false, fmt.Errorf("%w: HAMT link name %q is shorter than its prefix", ErrInvalidData, l.Name)
		}
		lv, err := it.subShard(l.Cid, top.bits)
		if err != nil {
			return "", cid.Undef, false, err
		}
		it.stack = append(it.stack, lv)
	}
	return "", cid.Undef, false, nil
}

func (it *dirIter) subShard(c cid.Cid, above int) (shardLevel, error) {
	if it.shards[c] {
		return shardLevel{}, fmt.Errorf("%w: HAMT shard %s is linked twice in one directory", ErrInvalidData, c)
	}
	if it.shards == nil {
		it.shards = map[cid.Cid]bool{}
	}
	it.shards[c] = true
	nd, err := it.s.node(c)
	if err != nil {
		return shardLevel{}, err
	}
	pn, ok := nd.(*dag.ProtoNode)
	if !ok {
		return shardLevel{}, fmt.Errorf("%w: HAMT shard %s is not dag-pb", ErrInvalidData, c)
	}
	fsn, err := ft.FSNodeFromBytes(pn.Data())
	if err != nil {
		return shardLevel{}, fmt.Errorf("%w: node %s is not UnixFS: %v", ErrInvalidData, c, err)
	}
	if fsn.Type() != ft.THAMTShard {
		return shardLevel{}, fmt.Errorf("%w: node %s of type %s inside a HAMT", ErrInvalidData, c, fsn.Type())
	}
	return shardOf(pn, fsn, above)
}
