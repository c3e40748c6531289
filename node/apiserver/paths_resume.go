package apiserver

import (
	"fmt"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
)

// submitRequest checks the local paths a submit reads for the caller: its
// declaration's, and those of the image and inputs a resume puts in place
// of the job's own (api.SubmitRequest's Image and Data).
func (p *pathCheck) submitRequest(req api.SubmitRequest) error {
	if err := p.declaration(req.Declaration); err != nil {
		return err
	}
	if err := market.CheckSources(market.Declaration{Data: req.Data}, func(path string) (bool, error) { return true, p.mayRead(path) }); err != nil {
		return fmt.Errorf("--input: %w", err)
	}
	if err := p.image(req.Image); err != nil {
		return fmt.Errorf("--image: %w", err)
	}
	return nil
}
