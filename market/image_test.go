package market

import (
	"encoding/json"
	"strings"
	"testing"
)

const imageCID = "bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi"

var pinnedRef = "docker://registry.example:5000/team/trainer@sha256:" + strings.Repeat("ab", 32)

func withImage(image, ref string) string {
	w := "work:\n"
	if image != "" {
		w += "  image: " + image + "\n"
	}
	if ref != "" {
		w += "  image_ref: " + ref + "\n"
	}
	return strings.Replace(base, "work:\n", w, 1)
}

func TestDecodeImageAccepted(t *testing.T) {
	for _, c := range []struct{ image, ref string }{
		{"oci:./layout", ""},
		{"oci:/abs/layout:v1.2", ""},
		{"oci-archive:trainer.tar", ""},
		{"oci-archive:./trainer.tar:latest", ""},
		{"docker-archive:./saved.tar", ""},
		{"docker-archive:./saved.tar:busybox:latest", ""},
		{"docker://busybox", ""},
		{"docker://docker.io/library/busybox:1.36", ""},
		{"docker://127.0.0.1:5000/a/b-c__d.e:tag_1", ""},
		{"docker://[::1]:5000/a/b@sha256:" + strings.Repeat("0", 64), ""},
		{"docker://ghcr.io/org/img:v1@sha256:" + strings.Repeat("f", 64), ""},
		{imageCID, ""},
		{imageCID, pinnedRef},
	} {
		d, err := DecodeDeclaration([]byte(withImage(c.image, c.ref)))
		if err != nil {
			t.Errorf("image %q ref %q: %v", c.image, c.ref, err)
			continue
		}
		if d.Work.Image != c.image || d.Work.ImageRef != c.ref {
			t.Errorf("decoded image %q ref %q, want %q %q", d.Work.Image, d.Work.ImageRef, c.image, c.ref)
		}
	}
}

func TestDecodeImageRejected(t *testing.T) {
	for _, c := range []struct{ image, ref, want string }{
		{"./layout", "", "work.image: must be oci:PATH"},
		{"docker-daemon:busybox", "", "work.image: must be oci:PATH"},
		{`"oci:"`, "", "work.image: names no path: want oci:PATH"},
		{"oci-archive::tag", "", "work.image: names no path"},
		{`"oci:dir:"`, "", "work.image: has an empty or unprintable tag"},
		{`"oci:dir:a b"`, "", "work.image: has an empty or unprintable tag"},
		{"docker://", "", "work.image: is not a registry reference"},
		{"docker://Busybox", "", "work.image: is not a registry reference"},
		{"docker://busybox@sha256:abc", "", "work.image: is not a registry reference"},
		{"docker://busybox@sha512:" + strings.Repeat("0", 128), "", "work.image: is not a registry reference"},
		{"docker://a//b", "", "work.image: is not a registry reference"},
		{"[a]", "", "work.image: must be a string"},
		{`"oci:a\u0000b"`, "", "work.image: must not contain NUL"},
		{"oci:" + strings.Repeat("x", MaxImageLen), "", "work.image: must be at most"},
		{"", pinnedRef, "work.image_ref: needs work.image"},
		{"oci:./x", pinnedRef, "work.image_ref: is set at submit"},
		{imageCID, "docker://registry.example/a:latest", "work.image_ref: must be pinned to a digest"},
		{imageCID, "oci:./x", "work.image_ref: must be a registry reference"},
		{imageCID, "docker://reg/UPPER@sha256:" + strings.Repeat("0", 64), "work.image_ref: must be a registry reference"},
	} {
		_, err := DecodeDeclaration([]byte(withImage(c.image, c.ref)))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("image %q ref %q: got %v, want %q", c.image, c.ref, err, c.want)
		}
	}
	if _, err := DecodeDeclaration([]byte(strings.Replace(base, "work:\n", "work:\n  images: x\n", 1))); err == nil ||
		!strings.Contains(err.Error(), "work.images: unknown field (want one of image, command, env, workdir)") {
		t.Errorf("unknown work field: %v", err)
	}
}

// TestImageCanonical: a declaration without an image signs the same bytes
// as before the field existed, and one with an image round-trips through
// JSON (the gossip path) and validates there.
func TestImageCanonical(t *testing.T) {
	d, err := DecodeDeclaration([]byte(base))
	if err != nil {
		t.Fatal(err)
	}
	c, err := d.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(c), "image") {
		t.Fatalf("canonical form mentions an absent image: %s", c)
	}
	d.Work.Image, d.Work.ImageRef = imageCID, pinnedRef
	c, err = d.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(c), `"work":{"image":"`+imageCID+`","image_ref":"`+pinnedRef+`","command":["run"]`) {
		t.Fatalf("canonical: %s", c)
	}
	var back Declaration
	if err := json.Unmarshal(c, &back); err != nil {
		t.Fatal(err)
	}
	if err := back.Validate(); err != nil || back.Work.ImageRef != pinnedRef {
		t.Fatalf("round trip: %+v, %v", back.Work, err)
	}
}

// With an image, the command may be left out (the image's Entrypoint and
// Cmd run); without one, it is required.
func TestCommandOptionalWithAnImage(t *testing.T) {
	noCommand := strings.Replace(base, "  command: [run]\n", "", 1)
	d, err := DecodeDeclaration([]byte(strings.Replace(noCommand, "work:\n", "work:\n  image: "+imageCID+"\n", 1)))
	if err != nil {
		t.Fatalf("an image and no command: %v", err)
	}
	if len(d.Work.Command) != 0 {
		t.Fatalf("command %q, want none", d.Work.Command)
	}
	// What the submitter broadcasts decodes the same on every peer.
	raw, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeDeclaration(raw); err != nil {
		t.Fatalf("the JSON of a command-less declaration: %v\n%s", err, raw)
	}
	if _, err := DecodeDeclaration([]byte(noCommand)); err == nil || !strings.Contains(err.Error(), "work.command: is required") {
		t.Fatalf("no image and no command: %v", err)
	}
	withEmpty := strings.Replace(base, "command: [run]", `command: ["", x]`, 1)
	if _, err := DecodeDeclaration([]byte(strings.Replace(withEmpty, "work:\n", "work:\n  image: "+imageCID+"\n", 1))); err == nil || !strings.Contains(err.Error(), "work.command[0]") {
		t.Fatalf("an image and an empty program: %v", err)
	}
}

func TestSplitCIDPath(t *testing.T) {
	for s, want := range map[string]string{
		imageCID + "/out":          "out",
		imageCID + "/out/":         "out",
		imageCID + "/./out/p/x.pt": "out/p/x.pt",
		imageCID + "/":             ".",
	} {
		c, sub, ok := SplitCIDPath(s)
		if !ok || c.String() != imageCID || sub != want {
			t.Errorf("SplitCIDPath(%q) = %s %q %v, want %q", s, c, sub, ok, want)
		}
	}
	for _, s := range []string{imageCID, imageCID + "/../x", imageCID + "//abs", "./data/out", "/abs/" + imageCID + "/out", "notacid/out"} {
		if _, _, ok := SplitCIDPath(s); ok {
			t.Errorf("SplitCIDPath(%q) took it as a path inside a CID", s)
		}
	}
	// CID/PATH is not looked for on the disk.
	d, err := DecodeDeclaration([]byte(strings.Replace(base, "{source: ./in,", "{source: "+imageCID+"/out,", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckSources(d, func(string) (bool, error) { return false, nil }); err != nil {
		t.Fatalf("CheckSources of CID/out: %v", err)
	}
}
