package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestUnitVerifies runs systemd-analyze verify on the shipped unit, with
// ExecStart pointed at a binary that exists here (verify checks it).
// verify exits 0 on lines it ignores, so any output is a failure too.
func TestUnitVerifies(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("E31_REQUIRE_RUNC") != "" {
			t.Fatal("systemd-analyze not installed (.ci/deps installs it: apt-get install -y systemd)")
		}
		t.Skip("systemd-analyze not installed (apt-get install -y systemd)")
	}
	unit, err := os.ReadFile("dist/e31d.service")
	if err != nil {
		t.Fatal(err)
	}
	const exe = "ExecStart=/usr/local/bin/e31d "
	if !strings.Contains(string(unit), exe) {
		t.Fatalf("the unit does not start /usr/local/bin/e31d")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "e31d.service")
	if err := os.WriteFile(path, []byte(strings.Replace(string(unit), exe, "ExecStart="+self+" ", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", "--man=no", path).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	for _, want := range []string{"Type=notify", "Restart=on-failure", "KillMode=mixed", "ProtectSystem=full"} {
		if !strings.Contains(string(unit), "\n"+want+"\n") {
			t.Errorf("the unit lacks %s", want)
		}
	}
	// These break runc or every job (see the unit's comment).
	for _, never := range []string{"NoNewPrivileges=", "ProtectControlGroups=", "ProtectKernelTunables=", "PrivateDevices=", "RestrictNamespaces=", "SystemCallFilter=", "MemoryDenyWriteExecute="} {
		for _, line := range strings.Split(string(unit), "\n") {
			if strings.HasPrefix(line, never) {
				t.Errorf("the unit sets %s", line)
			}
		}
	}
}

// TestExampleConfigLoads reads the shipped config file the way e31d does,
// which refuses unknown keys, and checks that it says what it claims.
func TestExampleConfigLoads(t *testing.T) {
	cmd := newCommand()
	var o options
	if err := applyFile(cmd.Flags(), "dist/e31d.toml", &o); err != nil {
		t.Fatal(err)
	}
	if o.file.Data != "/var/lib/e31" || len(o.file.Listen) != 2 || o.file.ImageCacheSize != "64GiB" || o.retention.Hours() != 168 {
		t.Errorf("loaded %+v, retention %s", o.file, o.retention)
	}
}

// TestUnitVerifiesWithManPages runs systemd-analyze verify as the docs
// have a contributor run it, with man pages checked: once e31d's pages
// are installed (step 1 of docs/contributing-gpus.md), the unit's
// Documentation= lines find them.
func TestUnitVerifiesWithManPages(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed (apt-get install -y systemd)")
	}
	if _, err := exec.LookPath("man"); err != nil {
		t.Skip("man not installed (apt-get install -y man-db)")
	}
	manDir := t.TempDir()
	cmd := newCommand()
	cmd.SetArgs([]string{"man", "--dir", filepath.Join(manDir, "man1")})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("e31d man: %v", err)
	}
	unit, err := os.ReadFile("dist/e31d.service")
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "e31d.service")
	const exe = "ExecStart=/usr/local/bin/e31d "
	if err := os.WriteFile(path, []byte(strings.Replace(string(unit), exe, "ExecStart="+self+" ", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	verify := exec.Command(analyze, "verify", path)
	verify.Env = append(os.Environ(), "MANPATH="+manDir)
	out, err := verify.CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify with e31d's man pages installed: %v\n%s", err, out)
	}
	// Without them it fails, as a contributor would see it.
	bare := exec.Command(analyze, "verify", path)
	bare.Env = append(os.Environ(), "MANPATH="+t.TempDir())
	if out, err := bare.CombinedOutput(); err == nil && !strings.Contains(string(out), "man e31d") {
		t.Errorf("verify without the man pages passed: %s", out)
	}
}
