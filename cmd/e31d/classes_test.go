package main

import (
	"maps"
	"strings"
	"testing"
)

func TestMarketFlags(t *testing.T) {
	for _, tc := range []struct {
		mode, shards string
		shardsSet    bool
		want         map[string]int
		err          string
	}{
		{mode: "", want: nil},
		{mode: "", shards: "H100x8=2", err: "needs --market classes"},
		{mode: "hash", err: `--market "hash"`},
		{mode: "classes", want: nil},
		{mode: "classes", shardsSet: true, err: "derived from its class"},
		{mode: "classes", shards: "H100x8=4,consumer-24G=16", want: map[string]int{"H100x8": 4, "consumer-24G": 16}},
		{mode: "classes", shards: "H100x8=3", err: "power of two"},
		{mode: "classes", shards: "H100x8=0", err: "power of two"},
		{mode: "classes", shards: "H100x8", err: "CLASS=N"},
		{mode: "classes", shards: "h100=2", err: "class"},
		{mode: "classes", shards: "cpu=2,cpu=4", err: "named twice"},
	} {
		got, err := marketFlags(tc.mode, tc.shards, tc.shardsSet)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("marketFlags(%q, %q, %v) = %v, %v; want an error with %q", tc.mode, tc.shards, tc.shardsSet, got, err, tc.err)
			}
			continue
		}
		if err != nil || !maps.Equal(got, tc.want) {
			t.Errorf("marketFlags(%q, %q, %v) = %v, %v; want %v", tc.mode, tc.shards, tc.shardsSet, got, err, tc.want)
		}
	}
}
