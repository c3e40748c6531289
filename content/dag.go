package content

import (
	"context"
	"errors"
	"fmt"
	"slices"

	dag "github.com/ipfs/boxo/ipld/merkledag"
	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"
	ipld "github.com/ipfs/go-ipld-format"
)

// blockLinks returns the links of a verified block, in order. Raw blocks
// have none. A link to something we would refuse to fetch makes the whole
// block unacceptable, so hostile DAGs fail at the first such node.
func blockLinks(b blocks.Block) ([]*ipld.Link, error) {
	c := b.Cid()
	switch c.Type() {
	case cid.Raw:
		return nil, nil
	case cid.DagProtobuf:
		nd, err := dag.DecodeProtobuf(b.RawData())
		if err != nil {
			return nil, fmt.Errorf("%w: block %s does not decode as dag-pb: %v", ErrInvalidData, c, err)
		}
		for i, l := range nd.Links() {
			if err := checkCid(l.Cid); err != nil {
				return nil, fmt.Errorf("link %d of %s: %w", i, c, err)
			}
		}
		return nd.Links(), nil
	default:
		return nil, checkCid(c)
	}
}

// decodeNode turns a verified block into an ipld.Node for the UnixFS code.
func decodeNode(b blocks.Block) (ipld.Node, error) {
	switch b.Cid().Type() {
	case cid.Raw:
		return dag.DecodeRawBlock(b)
	case cid.DagProtobuf:
		nd, err := dag.DecodeProtobufBlock(b)
		if err != nil {
			return nil, fmt.Errorf("%w: block %s does not decode as dag-pb: %v", ErrInvalidData, b.Cid(), err)
		}
		return nd, nil
	default:
		return nil, checkCid(b.Cid())
	}
}

// node reads, verifies and decodes one block.
func (s *Store) node(c cid.Cid) (ipld.Node, error) {
	b, err := s.getBlock(c)
	if err != nil {
		return nil, err
	}
	return decodeNode(b)
}

// dagScan is what a local walk of a DAG found.
type dagScan struct {
	held    []cid.Cid // blocks held, depth-first pre-order, each once
	bytes   int64     // their total size
	missing []cid.Cid // absent blocks whose parents are held: roots of missing subtrees
	// missingBytes is the size of the missing subtrees as their parents'
	// links state it (0 for a missing root). It is only an estimate, for
	// progress: a hostile DAG can state anything.
	missingBytes int64
}

// scan walks the DAG under root as far as it is held. Only dag-pb nodes are
// read (and hashed); raw leaves are looked up by key, so a scan of a large
// file touches a few hundred KiB, not the file.
func (s *Store) scan(ctx context.Context, root cid.Cid) (dagScan, error) {
	var sc dagScan
	if err := checkCid(root); err != nil {
		return sc, err
	}
	seen := map[cid.Cid]struct{}{}
	stack := []*ipld.Link{{Cid: root}}
	for len(stack) > 0 {
		if err := ctx.Err(); err != nil {
			return sc, err
		}
		l := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		c := l.Cid
		if _, ok := seen[c]; ok {
			continue
		}
		seen[c] = struct{}{}
		size, held, err := s.blockSize(c)
		if err != nil {
			return sc, err
		}
		if !held {
			sc.missing = append(sc.missing, c)
			sc.missingBytes += int64(l.Size)
			continue
		}
		sc.held = append(sc.held, c)
		sc.bytes += int64(size)
		if c.Type() != cid.DagProtobuf {
			continue
		}
		b, err := s.getBlock(c)
		if err != nil {
			return sc, err
		}
		links, err := blockLinks(b)
		if err != nil {
			return sc, err
		}
		// Reversed onto the stack so that children pop in link order,
		// which is file order for UnixFS.
		for _, l := range slices.Backward(links) {
			stack = append(stack, l)
		}
	}
	return sc, nil
}

// Has reports whether the whole DAG under root is held locally.
func (s *Store) Has(ctx context.Context, root cid.Cid) (bool, error) {
	sc, err := s.scan(ctx, root)
	if err != nil {
		return false, fmt.Errorf("check %s: %w", root, err)
	}
	return len(sc.missing) == 0, nil
}

// Size returns the bytes of all blocks of the DAG under root, each block
// counted once: what a fetch of it moves and what it takes on disk. The DAG
// must be complete.
func (s *Store) Size(ctx context.Context, root cid.Cid) (int64, error) {
	sc, err := s.scan(ctx, root)
	if err != nil {
		return 0, fmt.Errorf("size of %s: %w", root, err)
	}
	if len(sc.missing) > 0 {
		return 0, fmt.Errorf("size of %s: %w: %d subtrees missing, first %s", root, ErrIncomplete, len(sc.missing), sc.missing[0])
	}
	return sc.bytes, nil
}

// storeDAG gives boxo's UnixFS code read access to the store, through the
// verifying read path. Writes go through dagWriter instead.
type storeDAG struct{ s *Store }

func (d storeDAG) Get(_ context.Context, c cid.Cid) (ipld.Node, error) {
	nd, err := d.s.node(c)
	if errors.Is(err, ErrNotFound) {
		return nil, ipld.ErrNotFound{Cid: c}
	}
	return nd, err
}

func (d storeDAG) GetMany(ctx context.Context, cs []cid.Cid) <-chan *ipld.NodeOption {
	return getMany(ctx, d, cs)
}

func (d storeDAG) Add(context.Context, ipld.Node) error {
	return errors.New("content: read-only DAG service")
}

func (d storeDAG) AddMany(context.Context, []ipld.Node) error {
	return errors.New("content: read-only DAG service")
}

func (d storeDAG) Remove(context.Context, cid.Cid) error {
	return errors.New("content: read-only DAG service")
}

func (d storeDAG) RemoveMany(context.Context, []cid.Cid) error {
	return errors.New("content: read-only DAG service")
}

// getMany serves NodeGetter.GetMany from Get; every node is local.
func getMany(ctx context.Context, g ipld.NodeGetter, cs []cid.Cid) <-chan *ipld.NodeOption {
	out := make(chan *ipld.NodeOption, len(cs))
	go func() {
		defer close(out)
		for _, c := range cs {
			nd, err := g.Get(ctx, c)
			select {
			case out <- &ipld.NodeOption{Node: nd, Err: err}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}
