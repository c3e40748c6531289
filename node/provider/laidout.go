package provider

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

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
// renamed into place, and a lease that loses the race to another uses the
// winner's. It is removed by the retention sweep once no pin holds its root
// and no live lease mounts it.

// layoutTmpPrefix starts the temporary names of layouts in progress, which
// a crash may leave and the sweep removes.
const layoutTmpPrefix = ".tmp-"

func (p *Provider) inputsDir() string { return filepath.Join(p.cfg.DataDir, "inputs") }

// layOut returns the folder (or file) holding root laid out, making it if
// needed, and records that lease mounts it. i tells a lease's inputs apart
// while they are laid out.
func (p *Provider) layOut(ctx context.Context, root cid.Cid, lease string, i int) (string, error) {
	dst := filepath.Join(p.inputsDir(), root.String())
	if p.useLaidOut(root.String(), lease, dst) {
		return dst, nil
	}
	if err := os.MkdirAll(p.inputsDir(), 0o755); err != nil {
		return "", err
	}
	tmp := filepath.Join(p.inputsDir(), layoutTmpPrefix+lease+"-"+strconv.Itoa(i))
	if err := os.RemoveAll(tmp); err != nil {
		return "", err
	}
	if err := p.d.Store.Export(ctx, root, tmp, nil); err != nil {
		os.RemoveAll(tmp)
		return "", err
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.RemoveAll(tmp)
		if _, serr := os.Lstat(dst); serr == nil {
			return dst, nil // another lease laid it out first
		}
		return "", err
	}
	return dst, nil
}

// useLaidOut records that lease mounts root's layout at dst, and reports
// whether it is there already. The sweep cannot remove it from here on.
func (p *Provider) useLaidOut(root, lease, dst string) bool {
	p.layouts.Lock()
	defer p.layouts.Unlock()
	if p.laidOut[root] == nil {
		p.laidOut[root] = make(map[string]bool)
	}
	p.laidOut[root][lease] = true
	_, err := os.Lstat(dst)
	return err == nil
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
		if lease, ok := strings.CutPrefix(name, layoutTmpPrefix); ok {
			if i := strings.LastIndexByte(lease, '-'); i >= 0 {
				lease = lease[:i]
			}
			p.mu.Lock()
			_, live := p.leases[lease]
			p.mu.Unlock()
			if !unfinished || live {
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
