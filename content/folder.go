package content

import (
	"context"
	"fmt"
	"strings"

	uio "github.com/ipfs/boxo/ipld/unixfs/io"
	"github.com/ipfs/go-cid"
)

// A FolderEntry is one entry of a folder Folder makes: a name and a DAG
// the store holds.
type FolderEntry struct {
	Name string
	Root cid.Cid
}

// Folder makes a UnixFS folder of DAGs the store holds, one entry a
// name, and pins it with reason: the entries are linked, not copied, so a
// folder of ten thousand outputs costs the folder's own blocks (sharded
// past a few thousand entries, as an imported folder is). A name given
// twice, an empty name or one with a slash is refused, as is an entry
// whose DAG is not all in the store.
func (s *Store) Folder(ctx context.Context, entries []FolderEntry, reason string) (cid.Cid, error) {
	s.gcMu.RLock()
	defer s.gcMu.RUnlock()
	w := newDagWriter(ctx, s)
	d, err := uio.NewDirectory(w, uio.WithCidBuilder(cidPrefix()), uio.WithMaxHAMTFanout(hamtFanout), uio.WithSizeEstimationMode(uio.SizeEstimationBlock))
	if err != nil {
		return cid.Undef, err
	}
	seen := make(map[string]bool, len(entries))
	for _, e := range entries {
		if e.Name == "" || e.Name == "." || e.Name == ".." || strings.Contains(e.Name, "/") || seen[e.Name] {
			return cid.Undef, fmt.Errorf("folder entry %q: want a distinct name without a slash", e.Name)
		}
		seen[e.Name] = true
		nd, err := s.node(e.Root)
		if err != nil {
			return cid.Undef, fmt.Errorf("folder entry %s (%s): %w", e.Name, e.Root, err)
		}
		if err := d.AddChild(ctx, e.Name, nd); err != nil {
			return cid.Undef, fmt.Errorf("folder entry %s: %w", e.Name, err)
		}
	}
	nd, err := d.GetNode()
	if err == nil {
		err = w.Add(ctx, nd)
	}
	if _, _, cerr := w.close(); err == nil {
		err = cerr
	}
	if err != nil {
		return cid.Undef, fmt.Errorf("make folder: %w", err)
	}
	root := nd.Cid()
	sc, err := s.scan(ctx, root)
	if err != nil {
		return cid.Undef, fmt.Errorf("make folder: %w", err)
	}
	if len(sc.missing) > 0 {
		return cid.Undef, fmt.Errorf("make folder: %w: %d blocks of its entries are not in the store", ErrIncomplete, len(sc.missing))
	}
	if err := s.commit(root, sc.held, reason); err != nil {
		return cid.Undef, fmt.Errorf("make folder: %w", err)
	}
	return root, nil
}
