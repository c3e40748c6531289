package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/e31network/e31/market"
)

// arrayFromFlags is the array --array, --values, --values-file and
// --max-failures declare; nil when they declare none. With values,
// --array lists the indices to run (each takes the value of its index)
// or only caps them (%P); a count there must be the number of values.
func arrayFromFlags(o submitOptions) (*market.Array, error) {
	var a market.Array
	switch {
	case o.values != "" && o.valuesFile != "":
		return nil, errors.New("--values and --values-file: give one of them")
	case o.values != "":
		a.Values = strings.Split(o.values, ",")
	case o.valuesFile != "":
		a.ValuesFile = o.valuesFile
	}
	withValues := o.values != "" || o.valuesFile != ""
	switch spec := o.array; {
	case spec == "":
	case withValues && strings.HasPrefix(spec, "%"):
		p, err := market.ParseArrayRange("1" + spec)
		if err != nil {
			return nil, fmt.Errorf("--array %s: %%P must be a number of tasks at once, at least 1", spec)
		}
		a.Parallel = p.Parallel
	default:
		p, err := market.ParseArrayRange(spec)
		if err != nil {
			return nil, fmt.Errorf("--array: %w", err)
		}
		a.Count, a.Indices, a.Parallel = p.Count, p.Indices, p.Parallel
		if withValues && a.Count > 0 {
			if o.valuesFile != "" || a.Count != len(a.Values) {
				return nil, fmt.Errorf("--array %s with values: the values make the tasks; give --array as indices to run only those (7,40,73) or as %%P alone to cap them (%%10)", spec)
			}
			a.Count = 0 // the values' own count
		}
	}
	if o.maxFailures < 0 {
		return nil, fmt.Errorf("--max-failures %d: want a number of failed tasks, at least 1", o.maxFailures)
	}
	a.MaxFailures = o.maxFailures
	if a.Count == 0 && len(a.Indices) == 0 && !withValues {
		if o.maxFailures > 0 {
			return nil, errors.New("--max-failures: only for an array (--array, --values or --values-file)")
		}
		return nil, nil
	}
	return &a, nil
}
