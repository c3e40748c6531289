package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSubmitImageAndGPUMemoryFlags(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "img.tar.gz"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	o := submitOptions{gpus: 1, limit: "1h", outputPath: "/out", image: "docker-archive:./img.tar.gz:me/tool:v1", gpuMemory: "40GiB"}
	d, err := declarationFromFlags(o, []string{"python3", "/app/train.py"})
	if err != nil {
		t.Fatal(err)
	}
	// The path is the submitter's, made absolute, as from a declaration file.
	if want := "docker-archive:" + filepath.Join(dir, "img.tar.gz") + ":me/tool:v1"; d.Work.Image != want {
		t.Errorf("work.image %q, want %q", d.Work.Image, want)
	}
	if d.Request.GPUMemory != 40<<30 {
		t.Errorf("gpu_memory %d, want 40GiB", d.Request.GPUMemory)
	}
	o.gpuMemory = "plenty"
	if _, err := declarationFromFlags(o, []string{"true"}); err == nil || !strings.Contains(err.Error(), "--gpu-memory") {
		t.Errorf("--gpu-memory plenty: %v", err)
	}
	o.gpuMemory, o.image = "", "oci-archive:"
	if _, err := declarationFromFlags(o, []string{"true"}); err == nil || !strings.Contains(err.Error(), "work.image") {
		t.Errorf("--image oci-archive: with no path: %v", err)
	}
}

// TestFlagsFormFlagsWithAFile: a flag that only builds a declaration is
// refused beside a declaration file, by name, rather than ignored.
func TestFlagsFormFlagsWithAFile(t *testing.T) {
	cmd := newSubmitCommand(&globalOptions{})
	for _, name := range flagsFormFlags() {
		if cmd.Flags().Lookup(name) == nil {
			t.Fatalf("flagsFormFlags names --%s, which submit does not have", name)
		}
	}
	if err := noFlagsFormFlags(cmd.Flags()); err != nil {
		t.Fatalf("no flag set: %v", err)
	}
	for _, kv := range [][2]string{{"wait", "true"}, {"json", "true"}, {"output", "x"}} {
		if err := cmd.Flags().Set(kv[0], kv[1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := noFlagsFormFlags(cmd.Flags()); err != nil {
		t.Fatalf("--wait --json -o go with a file: %v", err)
	}
	cmd.Flags().Set("gpus", "2")
	cmd.Flags().Set("image", "docker://busybox")
	err := noFlagsFormFlags(cmd.Flags())
	if err == nil || !strings.Contains(err.Error(), "--gpus") || !strings.Contains(err.Error(), "--image") {
		t.Fatalf("--gpus and --image with a file: %v", err)
	}
}

// With --image and no command, the job runs the image's Entrypoint and Cmd,
// and is named after the image.
func TestSubmitImageWithoutACommand(t *testing.T) {
	t.Chdir(t.TempDir())
	d, err := declarationFromFlags(submitOptions{gpus: 1, limit: "1h", outputPath: "/out", image: "docker://ghcr.io/team/trainer:v2"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Work.Command) != 0 || d.Name != "trainer" {
		t.Fatalf("command %q, name %q; want none and trainer", d.Work.Command, d.Name)
	}
	if _, err := declarationFromFlags(submitOptions{gpus: 1, limit: "1h", outputPath: "/out"}, nil); err == nil || !strings.Contains(err.Error(), "work.command") {
		t.Fatalf("neither image nor command: %v", err)
	}
	for ref, want := range map[string]string{
		"docker-archive:./img.tar.gz:me/tool:v1":                      "tool",
		"docker-archive:./img.tar.gz":                                 "img",
		"oci-archive:/x/trainer.tar":                                  "trainer",
		"oci:./layout:v1":                                             "layout",
		"docker://busybox":                                            "busybox",
		"docker://127.0.0.1:5000/a/b@sha256:00":                       "b",
		"bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi": "bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi",
	} {
		if got := imageName(ref); got != want {
			t.Errorf("imageName(%q) = %q, want %q", ref, got, want)
		}
	}
}

// Paths inside the job typed as flags are tidied (/data/ is /data); a
// relative one is still refused.
func TestSubmitFlagsCleanJobPaths(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "ds"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	o := submitOptions{gpus: 1, limit: "1h", outputPath: "/out/", inputs: []string{"./ds:/data/"}, ckptPath: "/ckpt//", ckptEvery: "10m"}
	d, err := declarationFromFlags(o, []string{"true"})
	if err != nil {
		t.Fatal(err)
	}
	if d.Data[0].Mount != "/data" || d.Output.Path != "/out" || d.Output.Checkpoints.Path != "/ckpt" {
		t.Fatalf("mount %q, output %q, checkpoints %q", d.Data[0].Mount, d.Output.Path, d.Output.Checkpoints.Path)
	}
	o.inputs = []string{"./ds:data"}
	if _, err := declarationFromFlags(o, []string{"true"}); err == nil || !strings.Contains(err.Error(), "absolute") {
		t.Fatalf("a relative mount: %v", err)
	}
}

// TestSubmitFileFlag: -f FILE is FILE, as kubectl and docker compose take
// theirs; FILE twice, or beside -- CMD, is refused naming both.
func TestSubmitFileFlag(t *testing.T) {
	for _, c := range []struct {
		file string
		args []string
		dash int
		want []string
		err  string
	}{
		{"", []string{"job.yaml"}, -1, []string{"job.yaml"}, ""},
		{"job.yaml", nil, -1, []string{"job.yaml"}, ""},
		{"job.yaml", []string{"other.yaml"}, -1, nil, "give one declaration FILE"},
		{"job.yaml", []string{"python3", "x.py"}, 0, nil, "-- python3 x.py: give either FILE or flags"},
	} {
		got, err := fileArg(c.file, c.args, c.dash)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("-f %q %v: %v, want %q", c.file, c.args, err, c.err)
			}
			continue
		}
		if err != nil || strings.Join(got, " ") != strings.Join(c.want, " ") {
			t.Errorf("-f %q %v: %v %v, want %v", c.file, c.args, got, err, c.want)
		}
	}
	// The flag is there, with its shorthand, and is not one of the flags
	// form's (it names the file they would be refused beside).
	cmd := newSubmitCommand(&globalOptions{})
	if f := cmd.Flags().ShorthandLookup("f"); f == nil || f.Name != "file" {
		t.Fatalf("-f: %v", f)
	}
}

// --resume auto in the flags form declares what output.checkpoints.resume
// does in a file, and needs a checkpoint path to resume from.
func TestSubmitFlagsResume(t *testing.T) {
	t.Chdir(t.TempDir())
	o := submitOptions{gpus: 1, limit: "1h", outputPath: "/out", ckptPath: "/ckpt", ckptEvery: "5m", resume: "auto", maxResumes: 5}
	d, err := declarationFromFlags(o, []string{"python3", "train.py"})
	if err != nil {
		t.Fatal(err)
	}
	if c := d.Output.Checkpoints; c == nil || c.Resume != "auto" || c.MaxResumes != 5 || c.Path != "/ckpt" {
		t.Fatalf("checkpoints %+v, want /ckpt resumed automatically at most 5 times", c)
	}
	o.ckptPath = ""
	if _, err := declarationFromFlags(o, []string{"python3", "train.py"}); err == nil || !strings.Contains(err.Error(), "--checkpoint-path") {
		t.Fatalf("--resume auto without a checkpoint path: %v", err)
	}
	o.ckptPath, o.resume = "/ckpt", "always"
	if _, err := declarationFromFlags(o, []string{"python3", "train.py"}); err == nil || !strings.Contains(err.Error(), "resume") {
		t.Fatalf("--resume always: %v", err)
	}
}
