package provider

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/e31network/e31/content"
	"github.com/ipfs/go-cid"
)

// An input is laid out once per provider, not once per lease: under
// DataDir/inputs/CID, exported from the store by the first lease that reads
// it and bind-mounted read-only into every run that reads it after. Inputs
// are mounted read-only, so no job can change what the next one sees, and
// a job sent to a provider that already holds its data (data gravity)
// starts without copying it again: laying out 2 GiB costs seconds, a bind
// mount nothing.
//
// A layout is complete or absent: it is exported into a temporary name and
// renamed into place, one export of a root at a time; a lease that finds
// one under way waits for it. Staging before the lease lays its inputs out
// too, so that a lease's rent goes to running rather than copying. It is
// removed by the retention sweep once no pin holds its root
// and no live lease mounts it.

// layoutTmpPrefix starts the temporary names of layouts in progress, which
// a crash may leave and the sweep removes.
const layoutTmpPrefix = ".tmp-"

// layouts are the inputs laid out under DataDir/inputs, one per root,
// shared by every lease whose run mounts them.
type layouts struct {
	*env // immutable, shared with the role
	// mu guards laidOut and layingOut. It is an ordering lock: it is held
	// across the Lstat that tells whether a layout is in place (useLaidOut)
	// and across a layout's removal (sweepLaidOut), so that no lease starts
	// to use a layout being removed. An export is never made under it.
	mu sync.Mutex
	// laidOut names, for each input root laid out under DataDir/inputs,
	// the leases whose runs mount it.
	laidOut map[string]map[string]bool
	// layingOut holds, for each root being exported into its layout, a
	// channel closed when that export ends.
	layingOut map[string]chan struct{}
}

func (li *layouts) inputsDir() string { return filepath.Join(li.cfg.DataDir, "inputs") }

// layoutOf is where root is laid out.
func (li *layouts) layoutOf(root cid.Cid) string {
	return filepath.Join(li.inputsDir(), root.String())
}

// layOut returns the folder (or file) holding root laid out, making it if
// needed, and records that lease mounts it; with lease empty (staging
// before the lease) it records nothing, and the layout lasts as long as
// the unpinned blocks it came from: until the next sweep. One export of a
// root runs at a time: a lease that finds another laying it out waits for
// that one rather than copy the same bytes again beside it.
func (li *layouts) layOut(ctx context.Context, root cid.Cid, lease string) (string, error) {
	dst := li.layoutOf(root)
	for {
		there, busy := li.useLaidOut(root.String(), lease, dst)
		if there {
			return dst, nil
		}
		if busy == nil {
			break
		}
		select {
		case <-busy:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	defer li.doneLayingOut(root.String())
	if err := os.MkdirAll(li.inputsDir(), 0o755); err != nil {
		return "", err
	}
	tmp := filepath.Join(li.inputsDir(), layoutTmpPrefix+root.String())
	if err := os.RemoveAll(tmp); err != nil {
		return "", err
	}
	if err := li.d.Store.Export(ctx, root, tmp, content.ExportOptions{Limits: li.cfg.Limits}); err != nil {
		os.RemoveAll(tmp)
		return "", err
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.RemoveAll(tmp)
		return "", err
	}
	return dst, nil
}

// laidOutHere reports whether root's layout is in place: a lease reading
// it then only bind-mounts it.
func (li *layouts) laidOutHere(root cid.Cid) bool {
	_, err := os.Lstat(li.layoutOf(root))
	return err == nil
}

// useLaidOut records that lease mounts root's layout at dst, and reports
// whether it is there already; if not, and another export of root is under
// way, busy closes when that one ends, else this caller is to lay it out
// and must call doneLayingOut. The sweep cannot remove it from here on.
func (li *layouts) useLaidOut(root, lease, dst string) (there bool, busy <-chan struct{}) {
	li.mu.Lock()
	defer li.mu.Unlock()
	if lease != "" {
		if li.laidOut[root] == nil {
			li.laidOut[root] = make(map[string]bool)
		}
		li.laidOut[root][lease] = true
	}
	if _, err := os.Lstat(dst); err == nil {
		return true, nil
	}
	if ch, ok := li.layingOut[root]; ok {
		return false, ch
	}
	li.layingOut[root] = make(chan struct{})
	return false, nil
}

// doneLayingOut ends the export of root that useLaidOut let this caller
// make, and wakes the leases waiting on it.
func (li *layouts) doneLayingOut(root string) {
	li.mu.Lock()
	defer li.mu.Unlock()
	close(li.layingOut[root])
	delete(li.layingOut, root)
}

// doneWithLaidOut records that lease's run no longer mounts anything.
func (li *layouts) doneWithLaidOut(lease string) {
	li.mu.Lock()
	defer li.mu.Unlock()
	for root, leases := range li.laidOut {
		delete(leases, lease)
		if len(leases) == 0 {
			delete(li.laidOut, root)
		}
	}
}

// sweepLaidOut removes the layouts of roots that nothing pins and no live
// lease mounts; with unfinished, also what a crash left half laid out by a
// lease that is gone.
func (li *layouts) sweepLaidOut(pinned map[string]bool, unfinished bool) error {
	entries, err := os.ReadDir(li.inputsDir())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	li.mu.Lock()
	defer li.mu.Unlock()
	var errs []error
	for _, e := range entries {
		name := e.Name()
		if root, ok := strings.CutPrefix(name, layoutTmpPrefix); ok {
			if _, busy := li.layingOut[root]; !unfinished || busy {
				continue
			}
		} else if len(li.laidOut[name]) > 0 || pinned[name] {
			continue
		}
		if err := os.RemoveAll(filepath.Join(li.inputsDir(), name)); err != nil {
			errs = append(errs, fmt.Errorf("remove laid-out input %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// pinnedRoots is the set of roots the store pins, by their text.
func pinnedRoots(ctx context.Context, store Store) (map[string]bool, error) {
	pins, err := store.Pins(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(pins))
	for _, pin := range pins {
		out[pin.Root.String()] = true
	}
	return out, nil
}
