package api

import (
	"fmt"
	"time"
)

// ParseSince reads a since bound as the CLI and the API take it: empty (no
// bound), an RFC 3339 time, or a duration back from now.
func ParseSince(v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return time.Time{}, fmt.Errorf("since %q: want a duration back from now (24h, 90m) or an RFC 3339 time (2026-11-29T14:00:00Z)", v)
	}
	return now.Add(-d), nil
}
