package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/e31network/e31/market"
)

func TestArrayFromFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    submitOptions
		want *market.Array
		err  string
	}{
		{name: "none", o: submitOptions{}},
		{name: "count", o: submitOptions{array: "0-9%3"}, want: &market.Array{Count: 10, Parallel: 3}},
		{name: "list", o: submitOptions{array: "7,40,73", maxFailures: 2}, want: &market.Array{Indices: []int{7, 40, 73}, MaxFailures: 2}},
		{name: "values", o: submitOptions{values: "a,b,c"}, want: &market.Array{Values: []string{"a", "b", "c"}}},
		{name: "values capped", o: submitOptions{values: "a,b,c", array: "%2"}, want: &market.Array{Values: []string{"a", "b", "c"}, Parallel: 2}},
		{name: "values of listed indices", o: submitOptions{values: "a,b,c", array: "0,2"}, want: &market.Array{Values: []string{"a", "b", "c"}, Indices: []int{0, 2}}},
		{name: "values and their count", o: submitOptions{values: "a,b,c", array: "3%1"}, want: &market.Array{Values: []string{"a", "b", "c"}, Parallel: 1}},
		{name: "values file", o: submitOptions{valuesFile: "lrs.txt", maxFailures: 5}, want: &market.Array{ValuesFile: "lrs.txt", MaxFailures: 5}},
		{name: "both values", o: submitOptions{values: "a", valuesFile: "f"}, err: "--values and --values-file: give one of them"},
		{name: "count not values'", o: submitOptions{values: "a,b", array: "5"}, err: "the values make the tasks"},
		{name: "count with a file", o: submitOptions{valuesFile: "f", array: "0-4"}, err: "the values make the tasks"},
		{name: "bad cap", o: submitOptions{values: "a", array: "%x"}, err: "%P must be a number"},
		{name: "bad list", o: submitOptions{array: "7,,9"}, err: "--array: array \"7,,9\""},
		{name: "max failures alone", o: submitOptions{maxFailures: 2}, err: "--max-failures: only for an array"},
		{name: "max failures below 0", o: submitOptions{array: "4", maxFailures: -1}, err: "--max-failures -1"},
	} {
		got, err := arrayFromFlags(tc.o)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %+v, %v; want %q", tc.name, got, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if (got == nil) != (tc.want == nil) || got != nil && (got.Count != tc.want.Count || got.Parallel != tc.want.Parallel ||
			got.MaxFailures != tc.want.MaxFailures || got.ValuesFile != tc.want.ValuesFile ||
			!slices.Equal(got.Values, tc.want.Values) || !slices.Equal(got.Indices, tc.want.Indices)) {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
