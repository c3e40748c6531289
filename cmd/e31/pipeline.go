package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
)

// pipelineLabel is the label every job of a pipeline file carries, its
// value the pipeline's name: e31 list, wait, get and withdraw select the
// pipeline by it.
const pipelineLabel = "pipeline"

// isPipelineFile reports whether a declaration FILE is a pipeline file
// (jobs: [...]); one that cannot be read is left to declarationFromFile,
// which says why.
func isPipelineFile(path string) bool {
	data, err := os.ReadFile(path)
	return err == nil && market.IsPipeline(data)
}

// submitPipeline submits the jobs of a pipeline file, upstreams first,
// each with its upstreams' IDs in place of their names (after, after_any,
// job:NAME/out), and all labelled pipeline=NAME. Every job is checked
// before any is submitted; should a submit fail midway, those submitted
// are withdrawn, so that a pipeline goes in whole or not at all. The
// daemon then runs it to its end without this command.
func submitPipeline(ctx context.Context, o submitOptions, g *globalOptions, path string) error {
	if o.wait {
		return fmt.Errorf("%s is a pipeline: --wait follows one job; follow the pipeline with e31 wait --label %s=NAME", path, pipelineLabel)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	p, err := market.DecodePipeline(data)
	if err != nil {
		return fmt.Errorf("%s is not a valid pipeline:\n%w", path, err)
	}
	if p.Name == "" {
		p.Name = strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	}
	order, err := p.Order()
	if err != nil {
		return err
	}
	base, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return err
	}
	names := map[string]bool{}
	secrets := make([]map[string][]byte, len(p.Jobs))
	for i := range p.Jobs {
		d := &p.Jobs[i]
		names[d.Name] = true
		if err := absSources(d, base); err != nil {
			return fmt.Errorf("jobs[%d] (%s): %w", i, d.Name, err)
		}
		if d.Labels == nil {
			d.Labels = map[string]string{}
		}
		d.Labels[pipelineLabel] = p.Name
		if err := checkJob(o, g, d, base); err != nil {
			return fmt.Errorf("jobs[%d] (%s): %w", i, d.Name, err)
		}
		if secrets[i], err = jobSecrets(o.secrets, d); err != nil {
			return fmt.Errorf("jobs[%d] (%s): %w", i, d.Name, err)
		}
	}
	ids := map[string]string{}
	var submitted []api.Job
	undo := func(cause error) error {
		for _, j := range slices.Backward(submitted) {
			if _, err := g.client().Withdraw(ctx, j.ID); err != nil {
				fmt.Fprintf(g.stderr, "e31: withdraw %s (%s) after the failed submit: %v\n", j.ID, j.Name, err)
			}
		}
		if len(submitted) > 0 {
			return fmt.Errorf("%w\nthe %d jobs of the pipeline submitted before it were withdrawn", cause, len(submitted))
		}
		return cause
	}
	for _, i := range order {
		d := p.Jobs[i]
		rename := func(refs []string) []string {
			out := slices.Clone(refs)
			for k, r := range out {
				if id, ok := ids[r]; ok {
					out[k] = id
				}
			}
			return out
		}
		d.After, d.AfterAny = rename(d.After), rename(d.AfterAny)
		d.Data = slices.Clone(d.Data)
		for k, in := range d.Data {
			if ref, sub, ok := market.SplitJobSource(in.Source); ok && names[ref] {
				d.Data[k].Source = market.JobSourcePrefix + ids[ref] + "/" + sub
			}
		}
		raw, err := json.Marshal(d)
		if err != nil {
			return undo(err)
		}
		bars := newProgress(g.stderr, o.json)
		j, err := g.client().Submit(ctx, api.SubmitRequest{Declaration: raw, Secrets: secrets[i]}, bars.update)
		bars.finish()
		if err != nil {
			return undo(fmt.Errorf("jobs[%d] (%s): %w", i, d.Name, err))
		}
		ids[d.Name] = j.ID
		submitted = append(submitted, j)
	}
	if o.json {
		return g.printJSON(submitted)
	}
	for _, i := range order {
		fmt.Fprintf(g.stdout, "%s %s\n", ids[p.Jobs[i].Name], p.Jobs[i].Name)
	}
	fmt.Fprintf(g.stderr, "submitted pipeline %q, %d jobs; this node runs it to its end. Follow it with: e31 wait --label %s=%s\n",
		p.Name, len(submitted), pipelineLabel, p.Name)
	return nil
}
