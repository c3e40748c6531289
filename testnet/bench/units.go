package bench

import (
	"fmt"
	"time"
)

// Ms is d in milliseconds, the unit most figures are shown in.
func Ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// HumanBytes writes n in the largest binary unit that keeps it at 1 or more.
func HumanBytes(n int64) string {
	f := float64(n)
	for _, u := range []string{"B", "KiB", "MiB", "GiB"} {
		if f < 1024 || u == "GiB" {
			if u == "B" {
				return fmt.Sprintf("%d B", n)
			}
			return fmt.Sprintf("%.1f %s", f, u)
		}
		f /= 1024
	}
	return ""
}
