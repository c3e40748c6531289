package exec

import (
	"maps"
	"slices"
	"strconv"
	"syscall"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// seccompGoarches are the architectures the profile is checked for.
var seccompGoarches = []string{"amd64", "arm64", "ppc64le", "s390x", "riscv64"}

// verdict is what a profile answers a call with these arguments: "allow",
// "errno N" or "default", evaluated as the kernel does for runc's filter:
// any matching allow rule allows; else a matching errno rule answers.
func verdict(t *testing.T, p *specs.LinuxSeccomp, name string, args [6]uint64) string {
	t.Helper()
	answer := "default"
	for _, r := range p.Syscalls {
		if !slices.Contains(r.Names, name) || !argsMatch(t, r.Args, args) {
			continue
		}
		switch r.Action {
		case specs.ActAllow:
			return "allow"
		case specs.ActErrno:
			answer = "errno " + strconv.Itoa(int(*r.ErrnoRet))
		default:
			t.Fatalf("%s: action %s", name, r.Action)
		}
	}
	return answer
}

// argsMatch holds when every comparison holds. A rule with two comparisons
// of one argument would mean "either" to runc, so none may have one.
func argsMatch(t *testing.T, cmp []specs.LinuxSeccompArg, args [6]uint64) bool {
	t.Helper()
	seen := map[uint]bool{}
	for _, c := range cmp {
		if seen[c.Index] {
			t.Fatalf("two comparisons of argument %d in one rule: %+v", c.Index, cmp)
		}
		seen[c.Index] = true
		a := args[c.Index]
		var ok bool
		switch c.Op {
		case specs.OpEqualTo:
			ok = a == c.Value
		case specs.OpNotEqual:
			ok = a != c.Value
		case specs.OpLessThan:
			ok = a < c.Value
		case specs.OpLessEqual:
			ok = a <= c.Value
		case specs.OpGreaterThan:
			ok = a > c.Value
		case specs.OpGreaterEqual:
			ok = a >= c.Value
		case specs.OpMaskedEqual:
			ok = a&c.Value == c.ValueTwo
		default:
			t.Fatalf("operator %s", c.Op)
		}
		if !ok {
			return false
		}
	}
	return true
}

// argProbes are the arguments each call is tried with: none, every socket
// family, personality's values, and clone's namespace flags in either of
// the places s390 and the others put them.
func argProbes() [][6]uint64 {
	probes := [][6]uint64{{}}
	for f := range uint64(64) {
		probes = append(probes, [6]uint64{f})
	}
	for _, v := range []uint64{0x8, 0x20000, 0x20008, 0xffffffff, 0x0400000 /* READ_IMPLIES_EXEC */, 1 << 32} {
		probes = append(probes, [6]uint64{v})
	}
	for _, flag := range []uint64{unix.CLONE_NEWNS, unix.CLONE_NEWUSER, unix.CLONE_NEWPID, unix.CLONE_NEWNET, unix.CLONE_NEWCGROUP, unix.CLONE_VM | unix.CLONE_THREAD} {
		probes = append(probes, [6]uint64{flag}, [6]uint64{0, flag})
	}
	return probes
}

func allNames(ps ...*specs.LinuxSeccomp) []string {
	names := map[string]bool{}
	for _, p := range ps {
		for _, r := range p.Syscalls {
			for _, n := range r.Names {
				names[n] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(names))
}

// TestSeccompSocketFamilies: socket(2) and socketpair(2) get through the
// filter for AF_UNIX, AF_INET, AF_INET6 and AF_NETLINK (and AF_UNSPEC,
// which creates nothing), and for no other family; socketcall(2), whose
// family a filter cannot see, never does; and the filter lists the native
// ABI alone.
func TestSeccompSocketFamilies(t *testing.T) {
	want := []uint64{unix.AF_UNSPEC, unix.AF_UNIX, unix.AF_INET, unix.AF_INET6, unix.AF_NETLINK}
	for _, goarch := range seccompGoarches {
		t.Run(goarch, func(t *testing.T) {
			p := seccompProfileFor(goarch, "6.12.0")
			for _, call := range []string{"socket", "socketpair"} {
				var allowed []uint64
				for f := range uint64(256) {
					for _, high := range []uint64{0, 1 << 32} {
						if verdict(t, p, call, [6]uint64{f | high}) == "allow" {
							allowed = append(allowed, f|high)
						}
					}
				}
				if !slices.Equal(allowed, want) {
					t.Errorf("%s allowed for families %v, want %v", call, allowed, want)
				}
				for _, f := range []uint64{unix.AF_ALG, unix.AF_VSOCK, unix.AF_KEY, unix.AF_PACKET} {
					if v := verdict(t, p, call, [6]uint64{f}); v != "default" {
						t.Errorf("%s(%d): %s, want the default EPERM", call, f, v)
					}
				}
			}
			if v := verdict(t, p, "socketcall", [6]uint64{1}); v != "default" {
				t.Errorf("socketcall: %s", v)
			}
			if p.DefaultAction != specs.ActErrno || *p.DefaultErrnoRet != uint(syscall.EPERM) {
				t.Errorf("default %s %d, want EPERM", p.DefaultAction, *p.DefaultErrnoRet)
			}
			want := []specs.Arch{seccompArches[goarch].arch}
			if goarch == "ppc64le" {
				want = nil // moby lists none: the runtime's native one
			}
			if !slices.Equal(p.Architectures, want) {
				t.Errorf("architectures %v, want %v alone", p.Architectures, want)
			}
		})
	}
	if len(seccompProfileFor("sparc64", "6.12.0").Architectures) != 0 {
		t.Error("an architecture moby does not know: not left to the runtime")
	}
}

// TestSeccompTighterThanDocker compares the sandbox's profile with
// Docker's default as moby/profiles gives it, for each architecture: every
// call with any of the probed arguments that the sandbox allows, Docker
// allows; every ABI the sandbox lists, Docker lists; and where the two
// differ it is one of the refusals seccomp.go names, each of which Docker
// does allow.
func TestSeccompTighterThanDocker(t *testing.T) {
	refusedNames := []string{"adjtimex", "clock_adjtime", "clock_adjtime64", "name_to_handle_at", "socketcall"}
	for _, goarch := range seccompGoarches {
		for _, release := range []string{"4.4.0", "6.12.0"} {
			t.Run(goarch+"/"+release, func(t *testing.T) {
				ours, docker := seccompProfileFor(goarch, release), dockerProfileFor(goarch, release)
				if ours.DefaultAction != docker.DefaultAction || *ours.DefaultErrnoRet != *docker.DefaultErrnoRet {
					t.Errorf("default %s %d, Docker's %s %d", ours.DefaultAction, *ours.DefaultErrnoRet, docker.DefaultAction, *docker.DefaultErrnoRet)
				}
				for _, a := range ours.Architectures {
					if !slices.Contains(docker.Architectures, a) {
						t.Errorf("lists %s, which Docker does not", a)
					}
				}
				tightened := map[string]bool{}
				for _, name := range allNames(ours, docker) {
					for _, args := range argProbes() {
						o, d := verdict(t, ours, name, args), verdict(t, docker, name, args)
						switch {
						case o == d:
						case o == "default" && d == "allow":
							tightened[name] = true
							family := args[0] &^ (1 << 32)
							if !slices.Contains(refusedNames, name) &&
								!((name == "socket" || name == "socketpair") && !slices.Contains(socketFamilies, family)) {
								t.Errorf("%s%v refused, Docker allows it: not a refusal seccomp.go names", name, args)
							}
						default:
							t.Errorf("%s%v: %s, Docker's %s", name, args, o, d)
						}
					}
				}
				for _, name := range refusedNames {
					// socketcall exists only where the ABI has it; Docker's
					// list names it everywhere.
					if !tightened[name] {
						t.Errorf("%s: Docker does not allow it, so refusing it tightens nothing", name)
					}
				}
				wantPtrace := "allow" // since 4.8, a traced process cannot skip its filter
				if release == "4.4.0" {
					wantPtrace = "default"
				}
				if got := verdict(t, ours, "ptrace", [6]uint64{}); got != wantPtrace {
					t.Errorf("ptrace on %s: %s, want %s", release, got, wantPtrace)
				}
			})
		}
	}
}
