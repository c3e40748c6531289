package provider

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

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

func (p *Provider) inputsDir() string { return filepath.Join(p.cfg.DataDir, "inputs") }

// layoutOf is where root is laid out.
func (p *Provider) layoutOf(root cid.Cid) string {
	return filepath.Join(p.inputsDir(), root.String())
}

// layOut returns the folder (or file) holding root laid out, making it if
// needed, and records that lease mounts it; with lease empty (staging
// before the lease) it records nothing, and the layout lasts as long as
// the unpinned blocks it came from: until the next sweep. One export of a
// root runs at a time: a lease that finds another laying it out waits for
// that one rather than copy the same bytes again beside it.
func (p *Provider) layOut(ctx context.Context, root cid.Cid, lease string) (string, error) {
	dst := p.layoutOf(root)
	for {
		there, busy := p.useLaidOut(root.String(), lease, dst)
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
	defer p.doneLayingOut(root.String())
	if err := os.MkdirAll(p.inputsDir(), 0o755); err != nil {
		return "", err
	}
	tmp := filepath.Join(p.inputsDir(), layoutTmpPrefix+root.String())
	if err := os.RemoveAll(tmp); err != nil {
		return "", err
	}
	if err := p.d.Store.Export(ctx, root, tmp, content.ExportOptions{Limits: p.cfg.Limits}); err != nil {
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
func (p *Provider) laidOutHere(root cid.Cid) bool {
	_, err := os.Lstat(p.layoutOf(root))
	return err == nil
}

// useLaidOut records that lease mounts root's layout at dst, and reports
// whether it is there already; if not, and another export of root is under
// way, busy closes when that one ends, else this caller is to lay it out
// and must call doneLayingOut. The sweep cannot remove it from here on.
func (p *Provider) useLaidOut(root, lease, dst string) (there bool, busy <-chan struct{}) {
	p.layouts.Lock()
	defer p.layouts.Unlock()
	if lease != "" {
		if p.laidOut[root] == nil {
			p.laidOut[root] = make(map[string]bool)
		}
		p.laidOut[root][lease] = true
	}
	if _, err := os.Lstat(dst); err == nil {
		return true, nil
	}
	if ch, ok := p.layingOut[root]; ok {
		return false, ch
	}
	p.layingOut[root] = make(chan struct{})
	return false, nil
}

// doneLayingOut ends the export of root that useLaidOut let this caller
// make, and wakes the leases waiting on it.
func (p *Provider) doneLayingOut(root string) {
	p.layouts.Lock()
	defer p.layouts.Unlock()
	close(p.layingOut[root])
	delete(p.layingOut, root)
}

// doneWithLaidOut records that lease's run no longer mounts anything.
func (p *Provider) doneWithLaidOut(lease string) {
	p.layouts.Lock()
	defer p.layouts.Unlock()
	for root, leases := range p.laidOut {
		delete(leases, lease)
		if len(leases) == 0 {
			delete(p.laidOut, root)
		}
	}
}

// sweepLaidOut removes the layouts of roots that nothing pins and no live
// lease mounts; with unfinished, also what a crash left half laid out by a
// lease that is gone.
func (p *Provider) sweepLaidOut(pinned map[string]bool, unfinished bool) error {
	entries, err := os.ReadDir(p.inputsDir())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	p.layouts.Lock()
	defer p.layouts.Unlock()
	var errs []error
	for _, e := range entries {
		name := e.Name()
		if root, ok := strings.CutPrefix(name, layoutTmpPrefix); ok {
			if _, busy := p.layingOut[root]; !unfinished || busy {
				continue
			}
		} else if len(p.laidOut[name]) > 0 || pinned[name] {
			continue
		}
		if err := os.RemoveAll(filepath.Join(p.inputsDir(), name)); err != nil {
			errs = append(errs, fmt.Errorf("remove laid-out input %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// pinnedRoots is the set of roots the store pins, by their text.
func (p *Provider) pinnedRoots(ctx context.Context) (map[string]bool, error) {
	pins, err := p.d.Store.Pins(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(pins))
	for _, pin := range pins {
		out[pin.Root.String()] = true
	}
	return out, nil
}
