package doctor

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCopyFailExposure(t *testing.T) {
	for release, want := range map[string]string{
		"4.9.337":                 "no",
		"4.14.0":                  "maybe",
		"5.15.0-179-generic":      "maybe",
		"6.1.0-42-amd64":          "maybe",
		"6.6.30":                  "maybe",
		"6.12.80-1-amd64":         "yes",
		"6.12.85":                 "no",
		"6.12.88+deb13-amd64":     "no",
		"6.15.2-arch1-1":          "yes",
		"6.18.21":                 "yes",
		"6.18.44-fc-v1300":        "no",
		"6.19.10-xanmod1":         "yes",
		"6.19.12-200.fc43.x86_64": "no",
		"7.0.7-1":                 "no",
		"garbage":                 "maybe",
	} {
		if got := copyFailExposure(release); got != want {
			t.Errorf("%s: %s, want %s", release, got, want)
		}
	}
}

func TestCopyFailCheck(t *testing.T) {
	for _, tc := range []struct {
		name   string
		aead   KernelAEAD
		want   Status
		detail string
		fix    string
	}{
		{"fixed kernel", KernelAEAD{Release: "6.19.13-200.fc43.x86_64", State: AEADLoaded}, OK, "outside the releases", ""},
		{"affected, loadable", KernelAEAD{Release: "6.12.80", State: AEADLoadable, Source: "/lib/modules/6.12.80"}, Warn, "is affected by", "install algif_aead /bin/false"},
		{"affected, built in", KernelAEAD{Release: "6.18.10", State: AEADBuiltIn}, Warn, "built in", "initcall_blacklist=algif_aead_init"},
		{"distribution kernel", KernelAEAD{Release: "5.15.0-179-generic", State: AEADLoadable}, Warn, "may be affected", "distribution's release"},
		{"blocked", KernelAEAD{Release: "6.12.80", State: AEADBlocked, Source: "/etc/modprobe.d/x.conf: install algif_aead /bin/false"}, OK, "blocked", ""},
		{"absent", KernelAEAD{Release: "6.12.80", State: AEADAbsent}, OK, "absent", ""},
		{"cannot tell", KernelAEAD{Release: "6.12.80", State: AEADUnknown}, Warn, "not known", "update the kernel"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := healthy()
			h.aead = tc.aead
			c := checkCopyFail(h)
			if c.Status != tc.want || !strings.Contains(c.Detail, tc.detail) || !strings.Contains(c.Fix, tc.fix) {
				t.Errorf("%s %q fix %q; want %s with %q, fix with %q", c.Status, c.Detail, c.Fix, tc.want, tc.detail, tc.fix)
			}
			if c.Status == Warn && !strings.Contains(c.Detail, "seccomp filter refuses AF_ALG") {
				t.Errorf("the warning does not say jobs cannot reach it: %q", c.Detail)
			}
		})
	}
}

// TestInspectAEAD reads made-up machines: the module loaded, built in,
// installed and loadable, installed and stopped by modprobe.d, not
// installed, and a kernel without modules whose config says.
func TestInspectAEAD(t *testing.T) {
	const rel = "6.12.80-1-amd64"
	write := func(t *testing.T, root, name, content string) {
		t.Helper()
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	installed := func(t *testing.T) string {
		root := t.TempDir()
		write(t, root, "proc/modules", "loop 40960 0 - Live 0x0\nalgif_hash 16384 0 - Live 0x0\n")
		write(t, root, "lib/modules/"+rel+"/modules.builtin", "kernel/crypto/aes_generic.ko\n")
		write(t, root, "lib/modules/"+rel+"/modules.dep", "kernel/crypto/algif_aead.ko.xz: kernel/crypto/af_alg.ko.xz\n")
		return root
	}
	gz := func(s string) string {
		var b bytes.Buffer
		z := gzip.NewWriter(&b)
		z.Write([]byte(s))
		z.Close()
		return b.String()
	}
	for _, tc := range []struct {
		name   string
		root   func(t *testing.T) string
		want   AEADState
		source string
	}{
		{"loadable", installed, AEADLoadable, "/lib/modules/" + rel},
		{"loaded", func(t *testing.T) string {
			root := installed(t)
			write(t, root, "proc/modules", "algif_aead 16384 0 - Live 0x0\n")
			return root
		}, AEADLoaded, "/proc/modules"},
		{"built in", func(t *testing.T) string {
			root := installed(t)
			write(t, root, "lib/modules/"+rel+"/modules.builtin", "kernel/crypto/algif_aead.ko\n")
			return root
		}, AEADBuiltIn, "modules.builtin"},
		{"stopped by install", func(t *testing.T) string {
			root := installed(t)
			write(t, root, "etc/modprobe.d/cve-2026-31431.conf", "# copy fail\ninstall algif_aead /bin/false\n")
			return root
		}, AEADBlocked, "/etc/modprobe.d/cve-2026-31431.conf: install algif_aead /bin/false"},
		{"stopped by blacklist", func(t *testing.T) string {
			root := installed(t)
			write(t, root, "usr/lib/modprobe.d/hardening.conf", "blacklist algif_aead\n")
			return root
		}, AEADBlocked, "blacklist algif_aead"},
		{"an install that loads it", func(t *testing.T) string {
			root := installed(t)
			write(t, root, "etc/modprobe.d/x.conf", "install algif_aead /sbin/modprobe --ignore-install algif_aead\n")
			return root
		}, AEADLoadable, ""},
		{"not installed", func(t *testing.T) string {
			root := installed(t)
			write(t, root, "lib/modules/"+rel+"/modules.dep", "kernel/crypto/af_alg.ko.xz:\n")
			return root
		}, AEADAbsent, ""},
		{"no modules, config says built in", func(t *testing.T) string {
			root := t.TempDir()
			write(t, root, "proc/config.gz", gz("CONFIG_CRYPTO_USER_API=y\nCONFIG_CRYPTO_USER_API_AEAD=y\n"))
			return root
		}, AEADBuiltIn, "/proc/config.gz"},
		{"no modules, config says not set", func(t *testing.T) string {
			root := t.TempDir()
			write(t, root, "boot/config-"+rel, "# CONFIG_CRYPTO_USER_API_AEAD is not set\n")
			return root
		}, AEADAbsent, "/boot/config-" + rel},
		{"nothing says", func(t *testing.T) string { return t.TempDir() }, AEADUnknown, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := inspectAEAD(tc.root(t), rel)
			if k.State != tc.want || !strings.Contains(k.Source, tc.source) || k.Release != rel {
				t.Errorf("%+v, want %s from %q", k, tc.want, tc.source)
			}
		})
	}
}

// TestKernelAEADHere reads this machine, which must give an answer.
func TestKernelAEADHere(t *testing.T) {
	k := Machine{}.KernelAEAD()
	t.Logf("%+v: %s", k, copyFailExposure(k.Release))
	if k.Release == "" {
		t.Error("no kernel release")
	}
}
