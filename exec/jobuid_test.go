package exec

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestJobEtc: a run with a uid of its own finds it named in passwd and
// group, beside root and nobody, and nothing else.
func TestJobEtc(t *testing.T) {
	passwd, group := jobEtc(165537, 165537)
	if passwd != "root:x:0:0:root:/root:/usr/sbin/nologin\njob:x:165537:165537:job:/tmp:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/tmp:/usr/sbin/nologin\n" {
		t.Errorf("passwd %q", passwd)
	}
	if group != "root:x:0:\njob:x:165537:\nnogroup:x:65534:\n" {
		t.Errorf("group %q", group)
	}
	if passwd, _ := jobEtc(jobUID, jobGID); strings.Contains(passwd, "job:") {
		t.Errorf("nobody named twice: %q", passwd)
	}
}

// TestUIDPool: claims are distinct and atomic, released by owner, and a
// sweep keeps what is still in use.
func TestUIDPool(t *testing.T) {
	p := uidPool{dir: filepath.Join(t.TempDir(), "claims"), base: 300000}
	a, err := p.claim("/e31/r1/e31-a")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := p.claim("/e31/r1/e31-b")
	c, _ := p.claim("/e31/r2/e31-c")
	if a != 300000 || b != 300001 || c != 300002 {
		t.Fatalf("claimed %d %d %d", a, b, c)
	}
	must(t, p.release("/e31/r1/e31-a"))
	if again, _ := p.claim("/e31/r1/e31-d"); again != a {
		t.Errorf("a released uid is not claimed again: %d", again)
	}
	if uid, ok := p.owned("/e31/r1/e31-b"); !ok || uid != b {
		t.Errorf("owned: %d %v", uid, ok)
	}
	// Runner r1 sweeps: its e31-d lives on, e31-b is gone; r2's is not its
	// to touch.
	must(t, p.releaseIf(func(o string) bool { return strings.HasPrefix(o, "/e31/r1/") && o != "/e31/r1/e31-d" }))
	for owner, want := range map[string]bool{"/e31/r1/e31-b": false, "/e31/r1/e31-d": true, "/e31/r2/e31-c": true} {
		if _, ok := p.owned(owner); ok != want {
			t.Errorf("%s holds a uid: %v, want %v", owner, ok, want)
		}
	}
}
