package submitter

import (
	"context"
	"fmt"
	"slices"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/market"
)

// newWork is the declaration the rerun's attempts run, checked and with
// its local inputs and image imported, once for every task: own (the
// job's declaration, an array's whole) with the image and inputs w
// replaces, or the declaration w gives, which must fit a job of tasks
// tasks: as many as the array's (one with no array keeps the array's
// count and values), or none for a job that is no array.
func (s *intake) newWork(ctx context.Context, own market.Declaration, w rework, tasks int, progress content.Progress) (market.Declaration, error) {
	d := fromTheStart(own)
	d.Data = slices.Clone(d.Data) // made exact below, in place
	if w.decl != nil {
		var err error
		if d, err = fitWork(*w.decl, own, tasks); err != nil {
			s.d.Metrics.Rejected.Inc()
			return market.Declaration{}, invalid(err)
		}
	}
	if w.image != "" {
		// What the submitter set of the image before is the old one's.
		d.Work.Image, d.Work.ImageRef, d.Work.ImageSize = w.image, "", 0
	}
	if len(w.data) > 0 {
		for _, in := range w.data {
			at := slices.IndexFunc(d.Data, func(have market.Input) bool { return have.Mount == in.Mount })
			in.Size = 0 // the import measures it
			if at < 0 {
				d.Data = append(d.Data, in)
				continue
			}
			d.Data[at] = in
		}
	}
	if err := d.Validate(); err != nil {
		s.d.Metrics.Rejected.Inc()
		return market.Declaration{}, invalid(fmt.Errorf("the new work: %w", err))
	}
	if err := s.resolveJobSources(ctx, &d); err != nil {
		s.d.Metrics.Rejected.Inc()
		return market.Declaration{}, invalid(err)
	}
	if err := checkLocalSources(d); err != nil {
		s.d.Metrics.Rejected.Inc()
		return market.Declaration{}, invalid(err)
	}
	if _, err := (importer{s.parts}).exact(ctx, &d, progress); err != nil {
		return market.Declaration{}, err
	}
	return d, nil
}
