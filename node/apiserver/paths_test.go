package apiserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/content/image"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/apiserver"
	"github.com/ipfs/go-cid"
)

// pathJobs takes every submit, and has one output to write.
type pathJobs struct {
	jobs
	submitted atomic.Int32
}

func (j *pathJobs) Submit(context.Context, api.SubmitRequest, content.Progress) (api.Job, error) {
	j.submitted.Add(1)
	return api.Job{ID: "job"}, nil
}

func (j *pathJobs) Output(string, bool, int) (string, cid.Cid, error) {
	return "", cid.MustParse("bafkqaaa"), nil
}

// writeOut exports an output of one file, out/result.txt, as the store
// would: into dest, made where it is not there.
type writeOut struct{}

func (writeOut) Export(_ context.Context, _ cid.Cid, dest string, _ content.ExportOptions) error {
	if err := os.Mkdir(dest, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	if err := os.Mkdir(filepath.Join(dest, "out"), 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dest, "out", "result.txt"), []byte("hello"), 0o644)
}

func (writeOut) Size(context.Context, cid.Cid) (int64, error) { return 5, nil }

// importImages takes every import.
type importImages struct {
	apiserver.Images
	imported atomic.Int32
}

func (i *importImages) Import(context.Context, string, content.Progress) (image.Record, error) {
	i.imported.Add(1)
	return image.Record{}, nil
}

// tree is a folder of files, some a caller of another uid may read and
// some not, and folders it may write in and not; its ancestors are made
// searchable, or the test skipped where they cannot be.
type tree struct{ base string }

func newTree(t *testing.T) tree {
	t.Helper()
	base := t.TempDir()
	// t.TempDir's own folder is 0700; those above it must let others
	// through already.
	for _, d := range []string{base, filepath.Dir(base)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for d := filepath.Dir(filepath.Dir(base)); ; d = filepath.Dir(d) {
		if st, err := os.Stat(d); err != nil || st.Mode().Perm()&0o001 == 0 {
			t.Skipf("%s is closed to other users: the test needs a temp dir they can reach (TMPDIR)", d)
		}
		if d == "/" {
			break
		}
	}
	tr := tree{base}
	for _, f := range []struct {
		name string
		mode os.FileMode
	}{
		{"public.txt", 0o644}, {"secret.txt", 0o600},
		{"tree/a.txt", 0o644}, {"tree/sub/b.txt", 0o600},
		{"locked/in.txt", 0o644},
		{"values.txt", 0o644}, {"values-secret.txt", 0o600},
		{"img.tar", 0o644}, {"img-secret.tar", 0o600},
	} {
		p := tr.path(f.name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("a\nb\n"), f.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, f.mode); err != nil { // past the umask
			t.Fatal(err)
		}
	}
	for d, mode := range map[string]os.FileMode{"locked": 0o700, "ro": 0o755, "shared": 0o777} {
		if err := os.MkdirAll(tr.path(d), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(tr.path(d), mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(tr.path("secret.txt"), tr.path("link")); err != nil {
		t.Fatal(err)
	}
	return tr
}

func (tr tree) path(name string) string { return filepath.Join(tr.base, name) }

// decl is a job staging input, with values_file and image where not "".
func decl(t *testing.T, input, values, img string) json.RawMessage {
	t.Helper()
	d := market.NewDeclaration("paths", []string{"true"}, 0, market.Duration(60_000), []market.Input{{Source: input, Mount: "/data/in"}})
	if values != "" {
		d.Array = &market.Array{ValuesFile: values}
	}
	d.Work.Image = img
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Over the unix socket, a caller of another uid than root or the daemon's
// gets only the paths it could read itself, and writes e31 get's folder
// only where it could write, the folder then its own. Root, and a caller
// over TCP with the token, reach every path. (The caller is said to be uid
// 4242 by the connection's hook; TestPeerCredFromKernel has the kernel say
// who connects.)
func TestPathsWithCallersRights(t *testing.T) {
	tr := newTree(t)
	var uid atomic.Uint32
	who := func(net.Conn) (apiserver.Caller, error) {
		return apiserver.Caller{UID: uid.Load(), GID: uid.Load()}, nil
	}
	js, ims := &pathJobs{}, &importImages{}
	cfg := apiserver.Config{Addr: filepath.Join(tr.base, "api.sock"), Jobs: js, Content: writeOut{}, Images: ims, Log: slog.New(slog.DiscardHandler)}
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := apiserver.Listen(ctx, apiserver.WithPeerCred(cfg, who))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = srv.Shutdown(context.Background()) })
	cfg.Addr, cfg.Access = "127.0.0.1:0", apiserver.NewAccess(testToken)
	tcp, err := apiserver.Listen(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tcp.Shutdown(context.Background()) })
	sock, token := api.NewClient(srv.Addr()), api.NewClient(tcp.Addr(), api.WithToken(testToken))

	// refused says whether err is a 403 naming what; a nil want, that
	// err is nil.
	check := func(what string, err error, want string) {
		t.Helper()
		var se *api.StatusError
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v, want it taken", what, err)
		case want != "" && (!errors.As(err, &se) || se.Code != http.StatusForbidden || !strings.Contains(se.Msg, want)):
			t.Errorf("%s: %v, want 403 naming %q", what, err, want)
		}
	}
	submit := func(cl *api.Client, d json.RawMessage) error {
		_, err := cl.Submit(ctx, api.SubmitRequest{Declaration: d}, nil)
		return err
	}
	uid.Store(4242)
	for _, tc := range []struct {
		name               string
		input, values, img string
		refused            string
	}{
		{"a file others may read", "public.txt", "", "", ""},
		{"a file only its owner may read", "secret.txt", "", "", "secret.txt"},
		{"a folder with such a file deep in it", "tree", "", "", "b.txt"},
		{"a file in a folder others may not enter", "locked/in.txt", "", "", "locked"},
		{"nothing, in a folder others may not enter", "locked/none.txt", "", "", "locked"},
		{"nothing, in a folder others may enter", "none.txt", "", "", ""},
		{"a link to a file only its owner may read", "link", "", "", "secret.txt"},
		{"a values_file others may read", "public.txt", "values.txt", "", ""},
		{"a values_file only its owner may read", "public.txt", "values-secret.txt", "", "values-secret.txt"},
		{"an image archive others may read", "public.txt", "", "oci-archive:" + tr.path("img.tar"), ""},
		{"an image archive only its owner may read", "public.txt", "", "docker-archive:" + tr.path("img-secret.tar"), "img-secret.tar"},
	} {
		values := ""
		if tc.values != "" {
			values = tr.path(tc.values)
		}
		before := js.submitted.Load()
		err := submit(sock, decl(t, tr.path(tc.input), values, tc.img))
		check("submit "+tc.name, err, tc.refused)
		if taken := js.submitted.Load() > before; taken != (tc.refused == "") {
			t.Errorf("submit %s: reached the submitter %v", tc.name, taken)
		}
	}
	_, err = sock.ImportImage(ctx, api.ImageImportRequest{Ref: "oci-archive:" + tr.path("img-secret.tar")}, nil)
	check("image import of an archive only its owner may read", err, "img-secret.tar")
	_, err = sock.ImportImage(ctx, api.ImageImportRequest{Ref: "oci-archive:" + tr.path("img.tar")}, nil)
	check("image import of an archive others may read", err, "")
	if ims.imported.Load() != 1 {
		t.Errorf("%d imports reached the store, want 1", ims.imported.Load())
	}

	// e31 get writes only where the caller may, and gives it what it wrote.
	get := func(cl *api.Client, dir string) error {
		_, err := cl.Get(ctx, "job", api.GetRequest{Dir: tr.path(dir)})
		return err
	}
	check("get into a folder the caller may not write in", get(sock, "ro/out"), "ro")
	check("get under a folder the caller may not enter", get(sock, "locked/out"), "locked")
	if os.Geteuid() == 0 {
		check("get into a folder anyone may write in", get(sock, "shared/out"), "")
		for _, p := range []string{"shared/out", "shared/out/out", "shared/out/out/result.txt"} {
			st, err := os.Lstat(tr.path(p))
			if err != nil || st.Sys().(*syscall.Stat_t).Uid != 4242 {
				t.Errorf("%s: %v, want it the caller's (uid 4242)", p, err)
			}
		}
	} else {
		check("get for another user by a daemon that is not root", get(sock, "shared/out"), "no other user")
	}

	// Root reaches everything; so does the token over TCP. (A caller is
	// known from when it connected: root connects anew.)
	uid.Store(0)
	sock = api.NewClient(srv.Addr())
	check("submit by root", submit(sock, decl(t, tr.path("secret.txt"), "", "")), "")
	check("get by root", get(sock, "ro/root"), "")
	check("submit with the token", submit(token, decl(t, tr.path("secret.txt"), "", "")), "")
}

// The kernel says who connects: a process of another uid, connecting to the
// socket, is refused an archive only root may read and given one anyone
// may. It runs this test's binary again as nobody.
func TestPeerCredFromKernel(t *testing.T) {
	if sock := os.Getenv("E31_TEST_PEERCRED_SOCK"); sock != "" {
		peerCredChild(sock)
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("connecting as another user needs root")
	}
	tr := newTree(t)
	ims := &importImages{}
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := apiserver.Listen(ctx, apiserver.Config{Addr: tr.path("api.sock"), Images: ims, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = srv.Shutdown(context.Background()) })
	// Open to nobody, which a daemon's socket never is, so that the
	// kernel's answer is what refuses.
	if err := os.Chmod(srv.Addr(), 0o666); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	exe := tr.path("apiserver.test")
	if err := copyFile(self, exe, 0o755); err != nil {
		t.Fatal(err)
	}
	const nobody = 65534
	cmd := exec.Command(exe, "-test.run=^TestPeerCredFromKernel$")
	cmd.Env = append(os.Environ(), "E31_TEST_PEERCRED_SOCK="+srv.Addr(), "E31_TEST_PEERCRED_DIR="+tr.base)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the child as uid %d: %v\n%s", nobody, err, out)
	}
	if !strings.Contains(string(out), fmt.Sprintf("secret: 403 uid %d", nobody)) || !strings.Contains(string(out), "public: ok") {
		t.Fatalf("the child as uid %d said:\n%s", nobody, out)
	}
	if ims.imported.Load() != 1 {
		t.Fatalf("%d imports reached the store, want the public one", ims.imported.Load())
	}
}

// peerCredChild asks, over sock, for an import of a secret archive and a
// public one, and prints what it was answered.
func peerCredChild(sock string) {
	dir := os.Getenv("E31_TEST_PEERCRED_DIR")
	cl := api.NewClient(sock)
	for _, f := range []struct{ name, file string }{{"secret", "img-secret.tar"}, {"public", "img.tar"}} {
		_, err := cl.ImportImage(context.Background(), api.ImageImportRequest{Ref: "oci-archive:" + filepath.Join(dir, f.file)}, nil)
		var se *api.StatusError
		switch {
		case err == nil:
			fmt.Printf("%s: ok\n", f.name)
		case errors.As(err, &se):
			fmt.Printf("%s: %d %s\n", f.name, se.Code, strings.TrimPrefix(se.Msg, "forbidden: "))
		default:
			fmt.Printf("%s: %v\n", f.name, err)
		}
	}
}

func copyFile(from, to string, mode os.FileMode) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
