package market

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// scenarioStart is 2026-01-01T00:00:00Z, where every scenario begins.
const scenarioStart = int64(1_767_225_600_000)

// TestScenarios runs the scripted scenarios in testdata/*.txt. Each file
// builds a view with offer, lease, job and usage lines, runs match, and can
// play epochs forward: apply turns the last assignments into leases, and
// advance moves the clock, releasing leases that reached their limit.
// Run with -rewrite to update the expected output after a deliberate change.
func TestScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		if !strings.HasSuffix(path, ".txt") {
			t.Skip()
		}
		s := &scenario{v: View{Epoch: 1, Now: scenarioStart}}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return s.run(t, d)
		})
	})
}

type scenario struct {
	v    View
	last Result
}

func arg(d *datadriven.TestData, key, def string) string {
	if a, ok := d.Arg(key); ok {
		return strings.Join(a.Vals, ",")
	}
	return def
}

func mustDuration(t *testing.T, s string) Duration {
	t.Helper()
	neg := strings.HasPrefix(s, "-")
	v, err := ParseDuration(strings.TrimPrefix(strings.TrimPrefix(s, "-"), "+"))
	if err != nil {
		t.Fatal(err)
	}
	if neg {
		return -v
	}
	return v
}

func mustSize(t *testing.T, s string) Size {
	t.Helper()
	v, err := ParseSize(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func mustInt(t *testing.T, s string) int {
	t.Helper()
	v, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func (s *scenario) run(t *testing.T, d *datadriven.TestData) string {
	name := ""
	if len(d.CmdArgs) > 0 && len(d.CmdArgs[0].Vals) == 0 {
		name = d.CmdArgs[0].Key
	}
	switch d.Cmd {
	case "view":
		s.v.Epoch = uint64(mustInt(t, arg(d, "epoch", strconv.FormatUint(s.v.Epoch, 10))))
		return ""

	case "offer":
		// offer p1 gpus=4xH100:80GiB,2xA100:40GiB cpus=64 memory=512GiB busy=0,1 images=yes require_image=yes
		// max_job_disk=20GiB no_disk=full cpu_jobs=no price=2.40
		o := Offer{Provider: name, CPUs: mustInt(t, arg(d, "cpus", "64")), MemoryBytes: uint64(mustSize(t, arg(d, "memory", "512GiB"))),
			Images: arg(d, "images", "no") == "yes", RequireImage: arg(d, "require_image", "no") == "yes",
			Unreachable: arg(d, "unreachable", "no") == "yes", Draining: arg(d, "draining", "no") == "yes",
			Closed: arg(d, "closed", "no") == "yes", MaxJobDisk: uint64(mustSize(t, arg(d, "max_job_disk", "0"))),
			NoDisk: arg(d, "no_disk", ""), NoCPUJobs: arg(d, "cpu_jobs", "yes") == "no", Price: mustPrice(t, arg(d, "price", "0"))}
		// open_until=+2h: the provider's contribution window ends two hours
		// from the scenario's now.
		if u := arg(d, "open_until", ""); u != "" {
			o.OpenUntil = s.v.Now + int64(mustDuration(t, u))
		}
		// holds=rootA:10GiB,rootB:1GiB lists roots; bloom=rootC,rootD puts
		// roots in the filter only.
		if h := arg(d, "holds", ""); h != "" {
			for _, r := range strings.Split(h, ",") {
				root, size, _ := strings.Cut(r, ":")
				o.Holdings.Roots = append(o.Holdings.Roots, Datum{Root: root, Size: uint64(mustSize(t, size))})
			}
			slices.SortFunc(o.Holdings.Roots, func(a, b Datum) int { return strings.Compare(a.Root, b.Root) })
		}
		if b := arg(d, "bloom", ""); b != "" {
			o.Holdings.Bloom = bloomOf(strings.Split(b, ",")...)
		}
		busy := map[int]bool{}
		if b := arg(d, "busy", ""); b != "" {
			for _, i := range strings.Split(b, ",") {
				busy[mustInt(t, i)] = true
			}
		}
		if spec := arg(d, "gpus", ""); spec != "" {
			for _, group := range strings.Split(spec, ",") {
				count, rest, _ := strings.Cut(group, "x")
				model, mem, _ := strings.Cut(rest, ":")
				for range mustInt(t, count) {
					i := len(o.GPUs)
					o.GPUs = append(o.GPUs, GPU{
						Index: i, UUID: fmt.Sprintf("%s/%d", name, i), Model: strings.ReplaceAll(model, "_", " "),
						MemoryBytes: uint64(mustSize(t, mem)), Free: !busy[i],
					})
				}
			}
		}
		s.v.Offers = slices.DeleteFunc(s.v.Offers, func(x Offer) bool { return x.Provider == name })
		s.v.Offers = append(s.v.Offers, o)
		return ""

	case "lease":
		// lease l1 provider=p1 gpus=0,1 job=j0 submitter=bob start=-1h limit=2h
		p := arg(d, "provider", "")
		l := Lease{
			ID: name, Job: arg(d, "job", "j-"+name), Provider: p, Submitter: arg(d, "submitter", "other"),
			CPUs: mustInt(t, arg(d, "cpus", "1")), MemoryBytes: uint64(mustSize(t, arg(d, "memory", "1GiB"))),
			Start: s.v.Now + int64(mustDuration(t, arg(d, "start", "0s"))), Limit: mustDuration(t, arg(d, "limit", "1h")),
		}
		if g := arg(d, "gpus", ""); g != "" {
			for _, i := range strings.Split(g, ",") {
				l.GPUs = append(l.GPUs, fmt.Sprintf("%s/%s", p, i))
			}
		}
		s.hold(l, false)
		s.v.Leases = append(s.v.Leases, l)
		return ""

	case "job":
		// job j1 submitter=alice gpus=8 limit=1h age=5m model=H100 gpumem=40GiB cpus=2 memory=8GiB image=yes avoid=p1,p2 nodes=2 checkpoint=20m max_price=2.00
		j := Job{
			Image: arg(d, "image", "no") == "yes",
			ID:    name, Submitter: arg(d, "submitter", "alice"),
			Avoid:       strings.FieldsFunc(arg(d, "avoid", ""), func(r rune) bool { return r == ',' }),
			SubmittedAt: s.v.Now - int64(mustDuration(t, arg(d, "age", "0s"))),
			Request: Request{
				GPUs: mustInt(t, arg(d, "gpus", "1")), GPUModel: strings.ReplaceAll(arg(d, "model", ""), "_", " "),
				GPUMemory: mustSize(t, arg(d, "gpumem", "0")), CPUs: mustInt(t, arg(d, "cpus", "1")),
				Memory: mustSize(t, arg(d, "memory", "1GiB")), Limit: mustDuration(t, arg(d, "limit", "1h")),
				Disk: mustSize(t, arg(d, "disk", "0")), MaxPrice: mustPrice(t, arg(d, "max_price", "0")),
			},
		}
		// data=rootA:10GiB,rootB:1GiB locality=off wait=30s
		if data := arg(d, "data", ""); data != "" {
			for _, r := range strings.Split(data, ",") {
				root, size, _ := strings.Cut(r, ":")
				j.Data = append(j.Data, Datum{Root: root, Size: uint64(mustSize(t, size))})
			}
		}
		// checkpoint=20m: the job checkpoints that often (Job.Checkpoint)
		j.Checkpoint = mustDuration(t, arg(d, "checkpoint", "0s"))
		j.Request.Locality = arg(d, "locality", "")
		j.Request.LocalityWait = mustDuration(t, arg(d, "wait", "0s"))
		// nodes=3 makes a gang: parts j1.0, j1.1 and j1.2, each with the
		// request, as a node expands one declaration.
		if n := mustInt(t, arg(d, "nodes", "0")); n >= 2 {
			j.Request.Nodes = n
			for r := range n {
				part := j
				part.ID = TaskID(name, r)
				s.v.Jobs = append(s.v.Jobs, part)
			}
			return ""
		}
		s.v.Jobs = append(s.v.Jobs, j)
		return ""

	case "usage":
		// usage alice=10h: GPU time, as a duration
		for _, a := range d.CmdArgs {
			s.v.Usage = slices.DeleteFunc(s.v.Usage, func(u Usage) bool { return u.Submitter == a.Key })
			s.v.Usage = append(s.v.Usage, Usage{Submitter: a.Key, GPUMillis: int64(mustDuration(t, a.Vals[0]))})
		}
		return ""

	case "match":
		o := Options{Reservations: mustInt(t, arg(d, "k", "0"))}
		if st := arg(d, "starving", ""); st != "" {
			o.StarvingAfter = mustDuration(t, st)
		}
		s.last = Match(s.v, o)
		// Scenarios about locality, gangs, contribution hours, disk and
		// jobs without GPUs are checked against the reference too.
		checked := slices.ContainsFunc(s.v.Jobs, func(j Job) bool { return len(j.Data) > 0 || j.Request.Nodes != 0 || j.Request.Disk != 0 }) ||
			slices.ContainsFunc(s.v.Offers, func(o Offer) bool {
				return o.Closed || o.OpenUntil != 0 || o.MaxJobDisk != 0 || o.NoDisk != "" || o.NoCPUJobs || o.Price != 0
			})
		if want := refMatch(s.v, o); checked && !reflect.DeepEqual(s.last, want) {
			t.Errorf("%s: Match differs from the reference matcher:\n%s\nreference:\n%s", d.Pos, s.format(s.last), s.format(want))
		}
		return s.format(s.last)

	case "apply":
		// Each assignment becomes a lease starting now, as if every claim
		// succeeded.
		var out strings.Builder
		for _, a := range s.last.Assignments {
			i := slices.IndexFunc(s.v.Jobs, func(j Job) bool { return j.ID == a.Job })
			j := s.v.Jobs[i]
			l := Lease{ID: "L-" + j.ID, Job: j.ID, Provider: a.Provider, Submitter: j.Submitter, GPUs: a.GPUs,
				CPUs: j.Request.CPUs, MemoryBytes: uint64(j.Request.Memory), Start: s.v.Now, Limit: j.Request.Limit}
			s.hold(l, false)
			s.v.Leases = append(s.v.Leases, l)
			s.v.Jobs = slices.Delete(s.v.Jobs, i, i+1)
			fmt.Fprintf(&out, "leased %s\n", l.ID)
		}
		return out.String()

	case "advance":
		s.v.Now += int64(mustDuration(t, name))
		s.v.Epoch++
		var out strings.Builder
		fmt.Fprintf(&out, "now +%s\n", Duration(s.v.Now-scenarioStart))
		s.v.Leases = slices.DeleteFunc(s.v.Leases, func(l Lease) bool {
			if l.End() > s.v.Now {
				return false
			}
			s.hold(l, true)
			fmt.Fprintf(&out, "released %s\n", l.ID)
			return true
		})
		return out.String()

	case "withdraw":
		s.v.Jobs = slices.DeleteFunc(s.v.Jobs, func(j Job) bool { return j.ID == name })
		return ""
	}
	t.Fatalf("unknown command %q", d.Cmd)
	return ""
}

// hold marks the devices of l as held (or free again) in its provider's
// offer, as the provider would re-advertise them.
func (s *scenario) hold(l Lease, free bool) {
	for oi := range s.v.Offers {
		o := &s.v.Offers[oi]
		if o.Provider != l.Provider {
			continue
		}
		for gi := range o.GPUs {
			if slices.Contains(l.GPUs, o.GPUs[gi].UUID) {
				o.GPUs[gi].Free = free
			}
		}
	}
}

func (s *scenario) format(r Result) string {
	var b strings.Builder
	for _, a := range r.Assignments {
		idx := make([]string, len(a.GPUs))
		for i, g := range a.GPUs {
			_, idx[i], _ = strings.Cut(g, "/")
		}
		fmt.Fprintf(&b, "assign %s -> %s gpus=[%s] rank=%d\n", a.Job, a.Provider, strings.Join(idx, " "), a.Rank)
	}
	for _, res := range r.Reservations {
		fmt.Fprintf(&b, "reserve %s -> %s from=+%s\n", res.Job, res.Provider, Duration(res.From-s.v.Now))
	}
	for _, w := range r.Waiting {
		fmt.Fprintf(&b, "wait %s: %s", w.Job, w.Reason)
		if len(w.Counts) > 0 {
			var cs []string
			for _, k := range sortedKeys(w.Counts) {
				cs = append(cs, fmt.Sprintf("%s=%d", k, w.Counts[k]))
			}
			fmt.Fprintf(&b, " {%s}", strings.Join(cs, " "))
		}
		b.WriteString("\n")
	}
	if b.Len() == 0 {
		return "nothing to do\n"
	}
	return b.String()
}

func mustPrice(t *testing.T, s string) Price {
	t.Helper()
	p, err := ParsePrice(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
