package scale

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// writeClassText prints a class network's report: the network, the
// topics the daemon joined, and what it paid beside the goals of its role.
func (r Report) writeClassText(w io.Writer) error {
	cr, m := r.Classes, r.Measured
	var b strings.Builder
	fmt.Fprintf(&b, "scale-bench --classes: %d providers, %g jobs/s, %d neighbours, %.0f s window (load %s)\n",
		r.Providers, r.JobsPerS, r.Neighbours, r.WindowS, r.Load)
	var sizes []string
	for _, s := range cr.Sizes {
		sizes = append(sizes, fmt.Sprintf("%s %d in %d", s.Class, s.Providers, s.Subshards))
	}
	fmt.Fprintf(&b, "%d markets: %s\n", cr.Subshards, strings.Join(sizes, ", "))
	switch cr.Role {
	case RoleProvider:
		fmt.Fprintf(&b, "the daemon: a provider of %s in %s, with %d providers and %.2f jobs/s\n", providerSpec, cr.Market, cr.MarketProviders, cr.MarketJobsPerS)
	default:
		fmt.Fprintf(&b, "the daemon: a submitter with %d open jobs, following %s\n", cr.OpenJobs, orNone(cr.Followed))
	}
	fmt.Fprintf(&b, "topics the daemon joined: %d of %d\n\n", len(cr.Topics), 1+2*cr.Subshards)
	fmt.Fprintf(&b, "%-18s %-14s %s\n", "one "+cr.Role+" pays", "measured", "goal")
	for _, g := range cr.Goals {
		fmt.Fprintf(&b, "%-18s %-14s %s\n", g.Name, figure(g.Name, g.Measured), goalText(g))
	}
	if cr.Role == RoleSubmitter {
		fmt.Fprintf(&b, "%-18s %-14s\n%-18s %-14s\n", "cores", figure("cores", m.CPUCores), "RSS bytes", figure("RSS bytes", m.RSSBytes))
	} else {
		fmt.Fprintf(&b, "%-18s %-14s (model: %.1f KB/s in, %.3f cores)\n", "Match per pass", fmt.Sprintf("%.2f ms", m.MatchMs), r.Model.BytesInPerS/1e3, r.Model.CPUCores)
	}
	fmt.Fprintf(&b, "%-18s offers %s, jobs %s, digests %s\n", "bytes in by topic", figure("", m.BytesInByTopic["offers"]),
		figure("", m.BytesInByTopic["jobs"]), figure("", m.BytesInByTopic["digest"]))
	fmt.Fprintf(&b, "\nthe driver made %.0f offers/s, %.0f jobs messages/s and %.1f digests/s on the daemon's topics, using %.2f cores (%d messages failed)\n"+
		"unique offers accepted %.0f%%, jobs messages %.0f%%; dropped by per-peer limits: offers %.0f, jobs %.0f\n",
		m.OffersSentPerS, m.JobsMsgsSentPerS, m.DigestsSentPerS, m.DriverCPUCores, m.DriverErrors,
		100*m.OffersDelivered, 100*m.JobsDelivered, m.Limited["offers"], m.Limited["jobs"])
	_, err := io.WriteString(w, b.String())
	return err
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "no market"
	}
	return strings.Join(s, ", ")
}

// figure prints a measured value in the unit of its goal's name.
func figure(name string, v float64) string {
	switch name {
	case "cores":
		return fmt.Sprintf("%.3f", v)
	case "RSS bytes":
		return fmt.Sprintf("%.0f MB", v/1e6)
	}
	return fmt.Sprintf("%.1f KB/s", v/1e3)
}

func goalText(g Goal) string {
	mark := "met"
	if !g.Met {
		mark = "NOT met"
	}
	return "<= " + figure(g.Name, g.Limit) + ", " + mark
}

// RolesTable is runs of scale-bench --classes side by side, role by
// network size, beside the goals: each role's at 10,000
// providers, twice them at 100,000, and 100,000's figures within twice
// 10,000's.
type RolesTable struct {
	Rows    []RoleRow    `json:"rows"`
	Scaling []ScaleCheck `json:"scaling"`
}

// RoleRow is one run.
type RoleRow struct {
	Role      string  `json:"role"`
	Providers int     `json:"providers"`
	JobsPerS  float64 `json:"jobs_per_s"`
	WindowS   float64 `json:"window_s"`
	// Market is a provider's subshard and its size; Followed a
	// submitter's followed markets.
	Market          string   `json:"market,omitempty"`
	MarketProviders int      `json:"market_providers,omitempty"`
	Followed        []string `json:"followed,omitempty"`
	Topics          int      `json:"topics"`
	BytesInPerS     float64  `json:"peer_bytes_in_per_s"`
	BytesOutPerS    float64  `json:"peer_bytes_out_per_s"`
	// InByTopic is BytesInPerS by topic: offers, jobs, digest.
	InByTopic       map[string]float64 `json:"bytes_in_by_topic"`
	CPUCores        float64            `json:"peer_cpu_cores"`
	RSSBytes        float64            `json:"peer_rss_bytes"`
	OffersDelivered float64            `json:"offers_delivered"`
	// Goals are the role's goals at this size: the issue's, doubled past
	// 10,000 providers.
	Goals []Goal `json:"goals"`
}

// ScaleCheck compares one figure of a role at 100,000 providers with the
// same at 10,000.
type ScaleCheck struct {
	Role   string  `json:"role"`
	Figure string  `json:"figure"`
	At10k  float64 `json:"at_10000"`
	At100k float64 `json:"at_100000"`
	Ratio  float64 `json:"ratio"`
	Met    bool    `json:"met"`
}

// NewRolesTable sets reports of scale-bench --classes side by side.
func NewRolesTable(reports []Report) (RolesTable, error) {
	var t RolesTable
	for _, r := range reports {
		cr := r.Classes
		if cr == nil {
			return t, errors.New("scale: a report is not of a class network (scale-bench --classes)")
		}
		m := r.Measured
		gs := roleGoals(cr.Role, m)
		if r.Providers > 10000 {
			for i := range gs {
				gs[i].Limit *= 2
				gs[i].Met = gs[i].Measured <= gs[i].Limit
			}
		}
		t.Rows = append(t.Rows, RoleRow{Role: cr.Role, Providers: r.Providers, JobsPerS: r.JobsPerS, WindowS: r.WindowS,
			Market: cr.Market, MarketProviders: cr.MarketProviders, Followed: cr.Followed, Topics: len(cr.Topics),
			BytesInPerS: m.BytesInPerS, BytesOutPerS: m.BytesOutPerS, InByTopic: m.BytesInByTopic,
			CPUCores: m.CPUCores, RSSBytes: m.RSSBytes, OffersDelivered: m.OffersDelivered, Goals: gs})
	}
	slices.SortStableFunc(t.Rows, func(a, b RoleRow) int {
		return cmp.Or(strings.Compare(a.Role, b.Role), cmp.Compare(a.Providers, b.Providers))
	})
	for _, role := range []string{RoleProvider, RoleSubmitter} {
		small := slices.IndexFunc(t.Rows, func(r RoleRow) bool { return r.Role == role && r.Providers == 10000 })
		large := slices.IndexFunc(t.Rows, func(r RoleRow) bool { return r.Role == role && r.Providers == 100000 })
		if small < 0 || large < 0 {
			continue
		}
		a, b := t.Rows[small], t.Rows[large]
		for _, f := range []struct {
			name   string
			at, to float64
		}{
			{"bytes in per s", a.BytesInPerS, b.BytesInPerS},
			{"bytes out per s", a.BytesOutPerS, b.BytesOutPerS},
			{"cores", a.CPUCores, b.CPUCores},
			{"RSS bytes", a.RSSBytes, b.RSSBytes},
		} {
			c := ScaleCheck{Role: role, Figure: f.name, At10k: f.at, At100k: f.to}
			if f.at > 0 {
				c.Ratio = f.to / f.at
			}
			c.Met = f.to <= 2*f.at
			t.Scaling = append(t.Scaling, c)
		}
	}
	return t, nil
}

// ReadReports reads reports as scale-bench --json prints them, one a file.
func ReadReports(paths []string) ([]Report, error) {
	var out []Report
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("scale: %w", err)
		}
		var r Report
		if err := json.Unmarshal(raw, &r); err != nil {
			return nil, fmt.Errorf("scale: %s: not a scale-bench --json report: %w", p, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// WriteText prints the table: a line a run, each figure beside its goal.
func (t RolesTable) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%-10s %9s %8s %-26s %-20s %-26s %-22s %-22s %s\n", "role", "providers", "jobs/s", "KB/s in (goal)", "in: offers/jobs/dig.", "KB/s out (goal)", "cores (goal)", "RSS MB (goal)", "heard")
	for _, r := range t.Rows {
		cells := map[string]string{}
		for _, g := range r.Goals {
			mark := ""
			if !g.Met {
				mark = " over"
			}
			cells[g.Name] = fmt.Sprintf("(<= %s%s)", strings.TrimSuffix(figure(g.Name, g.Limit), " KB/s"), mark)
		}
		heard := fmt.Sprintf("%s of %d providers", r.Market, r.MarketProviders)
		if r.Role == RoleSubmitter {
			heard = "follows " + orNone(r.Followed)
		}
		fmt.Fprintf(&b, "%-10s %9d %8g %-26s %-20s %-26s %-22s %-22s %s; %d topics\n", r.Role, r.Providers, r.JobsPerS,
			fmt.Sprintf("%.1f %s", r.BytesInPerS/1e3, cells["bytes in per s"]),
			fmt.Sprintf("%.0f/%.0f/%.0f", r.InByTopic["offers"]/1e3, r.InByTopic["jobs"]/1e3, r.InByTopic["digest"]/1e3),
			fmt.Sprintf("%.1f %s", r.BytesOutPerS/1e3, cells["bytes out per s"]),
			fmt.Sprintf("%.3f %s", r.CPUCores, cells["cores"]),
			fmt.Sprintf("%.0f %s", r.RSSBytes/1e6, cells["RSS bytes"]),
			heard, r.Topics)
	}
	for _, c := range t.Scaling {
		mark := "within 2x"
		if !c.Met {
			mark = "NOT within 2x"
		}
		fmt.Fprintf(&b, "%s, %s: %s at 100,000 against %s at 10,000 (x%.2f, %s)\n", c.Role, c.Figure,
			figure(c.Figure, c.At100k), figure(c.Figure, c.At10k), c.Ratio, mark)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
