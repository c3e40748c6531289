package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	dag "github.com/ipfs/boxo/ipld/merkledag"
	ft "github.com/ipfs/boxo/ipld/unixfs"
	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"
	ipld "github.com/ipfs/go-ipld-format"
	carv2 "github.com/ipld/go-car/v2"
	"github.com/ipld/go-car/v2/storage"
	mh "github.com/multiformats/go-multihash"
)

// dagSet builds UnixFS DAGs by hand, honest or not, and keeps their
// blocks for a CAR: what a hostile submitter puts on the network.
type dagSet struct {
	blocks []blocks.Block
	seen   map[cid.Cid]bool
	// leave out these blocks of the CAR: they never come.
	leave map[cid.Cid]bool
}

func newDagSet() *dagSet { return &dagSet{seen: map[cid.Cid]bool{}, leave: map[cid.Cid]bool{}} }

// v1 is the CID prefix the daemon's importer uses.
var v1 = cid.Prefix{Version: 1, Codec: cid.DagProtobuf, MhType: mh.SHA2_256, MhLength: -1}

// chunk is the leaf size of files built here.
const chunk = 256 << 10

func (d *dagSet) add(n ipld.Node) ipld.Node {
	if !d.seen[n.Cid()] {
		d.seen[n.Cid()] = true
		d.blocks = append(d.blocks, n)
	}
	return n
}

// pb is a dag-pb node with UnixFS data and unnamed links.
func (d *dagSet) pb(t *testing.T, data []byte, links ...ipld.Node) *dag.ProtoNode {
	t.Helper()
	nd := dag.NodeWithData(data)
	if err := nd.SetCidBuilder(v1); err != nil {
		t.Fatal(err)
	}
	for _, l := range links {
		if err := nd.AddNodeLink("", l); err != nil {
			t.Fatal(err)
		}
	}
	return nd
}

// file is a UnixFS file of b: one raw leaf, or a node over raw leaves.
func (d *dagSet) file(t *testing.T, b []byte) ipld.Node {
	t.Helper()
	if len(b) == 0 {
		return d.add(d.pb(t, ft.FilePBData(nil, 0)))
	}
	if len(b) <= chunk {
		return d.add(dag.NewRawNode(b))
	}
	fsn := ft.NewFSNode(ft.TFile)
	var leaves []ipld.Node
	for off := 0; off < len(b); off += chunk {
		part := b[off:min(off+chunk, len(b))]
		leaves = append(leaves, d.add(dag.NewRawNode(part)))
		fsn.AddBlockSize(uint64(len(part)))
	}
	data, err := fsn.GetBytes()
	if err != nil {
		t.Fatal(err)
	}
	return d.add(d.pb(t, data, leaves...))
}

// claimed is a file node over links whose blocksizes say sizes[i] bytes
// each, whatever the linked nodes hold: a file that claims what it likes.
func (d *dagSet) claimed(t *testing.T, links []ipld.Node, sizes []uint64) ipld.Node {
	t.Helper()
	fsn := ft.NewFSNode(ft.TFile)
	for _, s := range sizes {
		fsn.AddBlockSize(s)
	}
	data, err := fsn.GetBytes()
	if err != nil {
		t.Fatal(err)
	}
	return d.add(d.pb(t, data, links...))
}

// entry is one link of a directory.
type entry struct {
	name string
	node ipld.Node
}

// dir is a UnixFS directory of the entries, in the order given, names
// unchecked.
func (d *dagSet) dir(t *testing.T, entries ...entry) ipld.Node {
	t.Helper()
	nd := d.pb(t, ft.FolderPBData())
	for _, e := range entries {
		if err := nd.AddNodeLink(e.name, e.node); err != nil {
			t.Fatal(err)
		}
	}
	return d.add(nd)
}

// tree is the DAG of a folder on disk: regular files and folders, names
// sorted as UnixFS sorts them.
func (d *dagSet) tree(t *testing.T, path string) ipld.Node {
	t.Helper()
	des, err := os.ReadDir(path)
	if err != nil {
		t.Fatal(err)
	}
	var es []entry
	for _, de := range des {
		p := filepath.Join(path, de.Name())
		if de.IsDir() {
			es = append(es, entry{de.Name(), d.tree(t, p)})
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		es = append(es, entry{de.Name(), d.file(t, b)})
	}
	return d.dir(t, es...)
}

// many is n entries named prefix0, prefix1, … linking to one node.
func many(prefix string, n int, to ipld.Node) []entry {
	es := make([]entry, n)
	for i := range es {
		es[i] = entry{fmt.Sprintf("%s%d", prefix, i), to}
	}
	return es
}

// nested is depth folders named "d", one inside the other, the deepest
// holding an empty file.
func (d *dagSet) nested(t *testing.T, depth int) ipld.Node {
	t.Helper()
	n := d.dir(t, entry{"f", d.file(t, nil)})
	for range depth - 1 {
		n = d.dir(t, entry{"d", n})
	}
	return n
}

// zeroTiB is a 1 TiB file made of one zero leaf of 1 MiB linked 2^20
// times through 1024 nodes that are all the same one: a valid UnixFS
// file whose DAG is 3 blocks.
func (d *dagSet) zeroTiB(t *testing.T) ipld.Node {
	t.Helper()
	leaf := d.add(dag.NewRawNode(make([]byte, 1<<20)))
	gib := d.claimed(t, slices.Repeat([]ipld.Node{leaf}, 1024), slices.Repeat([]uint64{1 << 20}, 1024))
	return d.claimed(t, slices.Repeat([]ipld.Node{gib}, 1024), slices.Repeat([]uint64{1 << 30}, 1024))
}

// car writes the blocks gathered, less those left out, as a CAR v1 with
// the roots.
func (d *dagSet) car(t *testing.T, roots ...cid.Cid) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := storage.NewWritable(&buf, roots, carv2.WriteAsCarV1(true))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range d.blocks {
		if d.leave[b.Cid()] {
			continue
		}
		if err := w.Put(context.Background(), b.Cid().KeyString(), b.RawData()); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Finalize(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// putRaw posts the DAG under root through node 0's POST /v1/debug/car and
// returns its CID.
func (h *hostileNet) putRaw(t *testing.T, d *dagSet, root ipld.Node) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := h.sub.PutCAR(ctx, bytes.NewReader(d.car(t, root.Cid())))
	if err != nil {
		t.Fatalf("POST /v1/debug/car: %v", err)
	}
	if len(res.Roots) != 1 || res.Roots[0] != root.Cid().String() {
		t.Fatalf("POST /v1/debug/car: roots %v, want %s", res.Roots, root.Cid())
	}
	return res.Roots[0]
}

// hostileJob is the declaration of a case's job: one GPU, a short limit.
func hostileJob(name, script string) market.Declaration {
	return decl("hostile-"+name, script, 1, time.Minute)
}

// failedJob is how a refused case ends: failed, the job's fault (the
// submitter's, who brought it), the reason naming what and why.
func failedJob(reason ...string) hostileWant {
	return hostileWant{outcome: string(ledger.OutcomeFailed), attribution: string(ledger.AttributionJob), reason: reason}
}

// inputCases are inputs a hostile submitter brings as raw DAGs, each
// mounted at /data: the provider must refuse each before the run, naming
// data[0] and why.
func inputCases() []hostileCase {
	input := func(name string, build func(t *testing.T, d *dagSet) ipld.Node, why ...string) hostileCase {
		return hostileCase{
			name: "input/" + name,
			want: failedJob(append([]string{"data[0]"}, why...)...),
			build: func(t *testing.T, h *hostileNet, _ *hostileWant) market.Declaration {
				d := newDagSet()
				root := build(t, d)
				c := h.putRaw(t, d, root)
				j := hostileJob(name, "ls -la /data; echo staged > /out/result")
				j.Data = []market.Input{{Source: c, Mount: "/data"}}
				return j
			},
		}
	}
	badName := func(name string) func(*testing.T, *dagSet) ipld.Node {
		return func(t *testing.T, d *dagSet) ipld.Node {
			return d.dir(t, entry{"ok", d.file(t, []byte("fine\n"))}, entry{name, d.file(t, []byte("evil\n"))})
		}
	}
	return []hostileCase{
		input("blocks-never-come", func(t *testing.T, d *dagSet) ipld.Node {
			absent := d.file(t, bytes.Repeat([]byte("never sent "), 100))
			d.leave[absent.Cid()] = true
			return d.dir(t, entry{"here", d.file(t, []byte("here\n"))}, entry{"absent", absent})
		}, "missing|never|not found|incomplete|stall|no block"),
		input("fan-out-2000", func(t *testing.T, d *dagSet) ipld.Node {
			return d.dir(t, many("f", 2000, d.file(t, nil))...)
		}, "entries|1000"),
		input("nested-600", func(t *testing.T, d *dagSet) ipld.Node { return d.nested(t, 600) }, "depth|deep|256"),
		input("claims-1TiB", func(t *testing.T, d *dagSet) ipld.Node {
			leaf := d.file(t, []byte("tiny"))
			return d.dir(t, entry{"big", d.claimed(t, []ipld.Node{leaf}, []uint64{1 << 40})})
		}, "TiB|1099511627776|too large|claim|request.disk"),
		input("name-slash", badName("a/b"), "name"),
		input("name-dotdot", badName(".."), "name"),
		input("name-nul", badName("nul\x00x"), "name"),
		input("name-newline", badName("new\nline"), "name"),
	}
}

// checkpointCases are checkpoints to resume from (output.checkpoints.from)
// that a hostile submitter brings as raw DAGs, each an attack a job's
// output could make: the provider must refuse each before the run, naming
// the checkpoint and why.
func checkpointCases() []hostileCase {
	ckpt := func(name string, build func(t *testing.T, d *dagSet) ipld.Node, why ...string) hostileCase {
		return hostileCase{
			name: "checkpoint/" + name,
			want: failedJob(append([]string{"checkpoint"}, why...)...),
			build: func(t *testing.T, h *hostileNet, _ *hostileWant) market.Declaration {
				d := newDagSet()
				c := h.putRaw(t, d, build(t, d))
				j := hostileJob("ckpt-"+name, "ls -la /ckpt; echo resumed > /out/result")
				j.Output.Checkpoints = &market.Checkpoints{Path: "/ckpt", Every: market.Duration(time.Minute.Milliseconds()), From: c}
				return j
			},
		}
	}
	named := func(name string) func(*testing.T, *dagSet) ipld.Node {
		return func(t *testing.T, d *dagSet) ipld.Node {
			return d.dir(t, entry{"model.pt", d.file(t, []byte("weights\n"))}, entry{name, d.file(t, []byte("evil\n"))})
		}
	}
	return []hostileCase{
		ckpt("1500-files", func(t *testing.T, d *dagSet) ipld.Node {
			return d.dir(t, many("f", 1500, d.file(t, nil))...)
		}, "entries|1000"),
		ckpt("zero-1TiB", func(t *testing.T, d *dagSet) ipld.Node {
			return d.dir(t, entry{"big", d.zeroTiB(t)})
		}, "request.disk|size|bytes|TiB"),
		ckpt("nested-300", func(t *testing.T, d *dagSet) ipld.Node { return d.nested(t, 300) }, "depth|deep|256"),
		ckpt("name-newline", named("new\nline"), "name"),
		ckpt("name-slash", named("a/b"), "name"),
	}
}

// outputCases are honest jobs, without an image, whose output attacks
// their submitter: past the entry cap, a 1 TiB sparse file, folders past
// the depth cap fail, naming the cap; fifos, sockets and a name with a
// newline are left out of an output that otherwise comes back whole.
func outputCases() []hostileCase {
	out := func(name, script string, want hostileWant) hostileCase {
		return hostileCase{
			name: "output/" + name,
			want: want,
			build: func(*testing.T, *hostileNet, *hostileWant) market.Declaration {
				return hostileJob("out-"+name, script)
			},
		}
	}
	special := out("fifo-socket-newline", `set -e
mkfifo fifo
perl -MIO::Socket::UNIX -e 'IO::Socket::UNIX->new(Local => "sock", Listen => 1) or die "socket: $!"'
printf x > "$(printf 'new\nline')"
echo ok > ok`, hostileWant{outcome: string(ledger.OutcomeCompleted), attribution: string(ledger.AttributionJob), skipped: []string{"fifo", "sock", "line"}})
	special.after = func(t *testing.T, h *hostileNet, j api.Job) {
		dir := filepath.Join(t.TempDir(), "get")
		if _, err := h.sub.Get(context.Background(), j.ID, api.GetRequest{Dir: dir}); err != nil {
			t.Fatalf("e31 get of an output with what was left out: %v", err)
		}
		if b, err := os.ReadFile(filepath.Join(dir, "out", "ok")); err != nil || strings.TrimSpace(string(b)) != "ok" {
			t.Fatalf("e31 get brought out/ok %q, %v", b, err)
		}
		des, err := os.ReadDir(filepath.Join(dir, "out"))
		if err != nil {
			t.Fatal(err)
		}
		for _, de := range des {
			if de.Name() != "ok" {
				t.Errorf("e31 get brought %q, which the output left out", de.Name())
			}
		}
	}
	return []hostileCase{
		out("1500-files", `i=0; while [ $i -lt 1500 ]; do : > f$i; i=$((i+1)); done`, failedJob("entries|1000")),
		out("sparse-1TiB", `truncate -s 1T big`, failedJob("request.disk")),
		out("nested-300", `set -e; for i in $(seq 300); do mkdir d && cd d; done; : > f`, failedJob("depth|deep|256")),
		special,
	}
}
