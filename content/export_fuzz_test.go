package content

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	dag "github.com/ipfs/boxo/ipld/merkledag"
	mdtest "github.com/ipfs/boxo/ipld/merkledag/test"
	ft "github.com/ipfs/boxo/ipld/unixfs"
	"github.com/ipfs/boxo/ipld/unixfs/hamt"
	uio "github.com/ipfs/boxo/ipld/unixfs/io"
	"github.com/ipfs/go-cid"
	ipld "github.com/ipfs/go-ipld-format"
	mh "github.com/multiformats/go-multihash"
)

// FuzzExport builds an arbitrary DAG from the fuzz input, read as a small
// program (fxOp), stores its blocks as a peer could send them, and exports
// it into a fresh folder. Whatever the DAG, nothing may panic, nothing may
// appear outside the folder, and what a successful export writes must be
// exactly the tree the DAG describes (as boxo's own UnixFS code reads it),
// made only of files, folders and symlinks that stay inside it, within the
// caps the export was given.
func FuzzExport(f *testing.F) {
	for _, s := range fxSeeds() {
		f.Add([]byte(s.prog))
	}
	f.Fuzz(func(t *testing.T, prog []byte) {
		ctx := context.Background()
		b := newFxBuilder()
		b.run(prog)
		root := b.root()
		top := t.TempDir()
		s := openStore(t, filepath.Join(top, "store"))
		b.put(t, s)
		outside := filepath.Join(top, "outside")
		if err := os.Mkdir(outside, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(outside, "sentinel"), []byte("untouched"), 0o644); err != nil {
			t.Fatal(err)
		}
		dest := filepath.Join(top, "dest")

		err := s.Export(ctx, root, dest, ExportOptions{Limits: fxLimits})
		t.Logf("export: %v", err)
		fxCheckTop(t, top)
		if err != nil {
			if errors.Is(err, ErrTooLarge) {
				var le *LimitError
				if !errors.As(err, &le) {
					t.Errorf("a refusal for size is not a *LimitError: %v", err)
				}
			}
			// What a failed export leaves must be as safe as a whole one.
			if _, serr := os.Lstat(dest); serr == nil {
				fxCheckLinks(t, dest, fxReadTree(t, dest))
			}
			return
		}
		got := fxReadTree(t, dest)
		fxCheckLinks(t, dest, got)
		var bytes int64
		for _, e := range got {
			bytes += int64(len(e.content))
		}
		if n := len(got) - 1; n > fxLimits.MaxEntries || bytes > fxLimits.MaxBytes {
			t.Errorf("export wrote %d entries and %d bytes, over its caps %+v", n, bytes, fxLimits)
		}
		want, err := b.expect(ctx, root)
		if err != nil {
			t.Fatalf("Export succeeded on a DAG that boxo cannot read: %v", err)
		}
		fxSameTree(t, want, got)
	})
}

// fxLimits are the caps of every export here: small enough that a DAG that
// describes more than it holds is refused quickly, large enough for the
// seeds that must pass.
var fxLimits = Limits{MaxBytes: 16 << 20, MaxEntries: 20000}

// fxOp is one instruction of a FuzzExport program. Each reads its operands
// from the bytes that follow (0 once they run out) and works on a stack
// of entries; the root is the top entry at the end.
type fxOp byte

const (
	fxRaw       fxOp = iota // raw leaf: n, then n bytes
	fxZeros                 // raw leaf of 1<<(b%21) zero bytes
	fxFile                  // file node over the top k entries: k, claim, data n + n bytes, mode
	fxRepeat                // file node linking the top entry u16 times: claim
	fxDir                   // folder over the top k entries: k, a name byte each, mode
	fxManyLinks             // folder of u16 links to the top entry: names distinct (even b) or all one
	fxSymlink               // symlink: a target byte
	fxMissing               // a raw leaf whose block is never stored: n, then n bytes
	fxNotUnixFS             // dag-pb node with arbitrary data over the top k entries: k, n + n bytes
	fxNest                  // wrap the top entry in b folders named by a name byte
	fxHAMT                  // boxo HAMT shard over the top k entries: fanout, k, a name byte each
	fxShard                 // hand-made HAMT shard over the top k entries: fanout, hash, bitfield n + n bytes, k, a prefix byte and a name byte each
	fxDup                   // push the top entry again
	fxPick                  // move entry b to the top
	fxForeign               // an entry with a CID the store refuses: b picks which
	fxV0                    // the top dag-pb node again, under a CIDv0
	fxNumOps
)

// Bounds on what one program builds, so that each run stays small.
const (
	fxMaxNodes = 2000
	fxMaxLinks = 60000 // across the program
)

// fxEntry is a node on the builder's stack.
type fxEntry struct {
	c cid.Cid
	// size is what a parent's UnixFS file states for this child: the
	// bytes it holds, or claims to.
	size uint64
}

type fxBuilder struct {
	in    []byte
	stack []fxEntry
	nodes map[cid.Cid]ipld.Node // every block made, stored or not
	keep  []ipld.Node           // blocks to store, in order
	lost  map[cid.Cid]bool      // blocks never stored
	made  int
	links int
}

func newFxBuilder() *fxBuilder {
	return &fxBuilder{nodes: map[cid.Cid]ipld.Node{}, lost: map[cid.Cid]bool{}}
}

func (b *fxBuilder) byte() byte {
	if len(b.in) == 0 {
		return 0
	}
	c := b.in[0]
	b.in = b.in[1:]
	return c
}

func (b *fxBuilder) u16() int { return int(b.byte())<<8 | int(b.byte()) }

func (b *fxBuilder) take(n int) []byte {
	n = min(n, len(b.in))
	out := bytes.Clone(b.in[:n])
	b.in = b.in[n:]
	return out
}

// top returns the top k entries, oldest first.
func (b *fxBuilder) top(k int) []fxEntry {
	k = min(k, len(b.stack))
	return slices.Clone(b.stack[len(b.stack)-k:])
}

func (b *fxBuilder) push(e fxEntry) { b.stack = append(b.stack, e) }

// add records a block and pushes it.
func (b *fxBuilder) add(nd ipld.Node, size uint64, store bool) {
	b.made++
	if _, ok := b.nodes[nd.Cid()]; !ok {
		b.nodes[nd.Cid()] = nd
		if store {
			b.keep = append(b.keep, nd)
		} else {
			b.lost[nd.Cid()] = true
		}
	}
	if store {
		delete(b.lost, nd.Cid())
	}
	b.push(fxEntry{c: nd.Cid(), size: size})
}

func (b *fxBuilder) run(prog []byte) {
	b.in = prog
	for len(b.in) > 0 && b.made < fxMaxNodes && b.links < fxMaxLinks {
		b.step(fxOp(b.byte() % byte(fxNumOps)))
	}
}

func (b *fxBuilder) step(op fxOp) {
	switch op {
	case fxRaw:
		data := b.take(int(b.byte()))
		b.add(dag.NewRawNode(data), uint64(len(data)), true)
	case fxZeros:
		data := make([]byte, 1<<(b.byte()%21))
		b.add(dag.NewRawNode(data), uint64(len(data)), true)
	case fxFile:
		kids := b.top(int(b.byte() % 9))
		claim := b.byte()
		data := b.take(int(b.byte() % 32))
		mode := fxModes[int(b.byte())%len(fxModes)]
		b.file(kids, claim, data, mode)
	case fxRepeat:
		if len(b.stack) == 0 {
			return
		}
		n := min(b.u16(), fxMaxLinks-b.links)
		kids := make([]fxEntry, n)
		for i := range kids {
			kids[i] = b.stack[len(b.stack)-1]
		}
		b.file(kids, b.byte(), nil, 0)
	case fxDir:
		kids := b.top(int(b.byte() % 9))
		names := make([]string, len(kids))
		for i := range names {
			names[i] = b.name()
		}
		b.dir(kids, names, fxModes[int(b.byte())%len(fxModes)])
	case fxManyLinks:
		if len(b.stack) == 0 {
			return
		}
		n := min(b.u16(), fxMaxLinks-b.links)
		same := b.byte()%2 == 1
		kids, names := make([]fxEntry, n), make([]string, n)
		for i := range kids {
			kids[i] = b.stack[len(b.stack)-1]
			names[i] = fmt.Sprintf("f%05d", i)
			if same {
				names[i] = "same"
			}
		}
		b.dir(kids, names, 0)
	case fxSymlink:
		i := int(b.byte())
		target := ""
		if i < len(fxTargets) {
			target = fxTargets[i]
		} else {
			target = string(b.take(i % 16))
		}
		data, err := ft.SymlinkData(target)
		if err != nil {
			return
		}
		b.add(fxPB(data), 0, true)
	case fxMissing:
		data := append([]byte("missing:"), b.take(int(b.byte()))...)
		b.add(dag.NewRawNode(data), uint64(len(data)), false)
	case fxNotUnixFS:
		kids := b.top(int(b.byte() % 9))
		nd := fxPB(b.take(int(b.byte() % 64)))
		for _, k := range kids {
			b.link(nd, "", k)
		}
		b.add(nd, 0, true)
	case fxNest:
		n, name := int(b.byte()), b.name()
		for range n {
			if b.made >= fxMaxNodes {
				return
			}
			b.dir(b.top(1), []string{name}, 0)
		}
	case fxHAMT:
		b.hamt()
	case fxShard:
		b.shard()
	case fxDup:
		if len(b.stack) > 0 {
			b.push(b.stack[len(b.stack)-1])
		}
	case fxPick:
		if len(b.stack) > 0 {
			i := int(b.byte()) % len(b.stack)
			e := b.stack[i]
			b.stack = append(slices.Delete(b.stack, i, i+1), e)
		}
	case fxForeign:
		data := []byte("foreign")
		var c cid.Cid
		switch b.byte() % 4 {
		case 0:
			c = cid.NewCidV1(cid.Raw, fxSum(data, mh.IDENTITY))
		case 1:
			c = cid.NewCidV1(cid.DagCBOR, fxSum(data, mh.SHA2_256))
		case 2:
			c = cid.NewCidV1(cid.Raw, fxSum(data, mh.BLAKE2B_MIN+31))
		default:
			c = cid.NewCidV1(cid.DagProtobuf, fxSum(data, mh.SHA2_512))
		}
		b.made++
		b.lost[c] = true
		b.push(fxEntry{c: c, size: uint64(len(data))})
	case fxV0:
		if len(b.stack) == 0 {
			return
		}
		pn, ok := b.nodes[b.stack[len(b.stack)-1].c].(*dag.ProtoNode)
		if !ok {
			return
		}
		v0 := pn.Copy().(*dag.ProtoNode)
		if err := v0.SetCidBuilder(dag.V0CidPrefix()); err != nil {
			return
		}
		b.add(v0, b.stack[len(b.stack)-1].size, true)
	}
}

func fxSum(data []byte, code uint64) mh.Multihash {
	h, err := mh.Sum(data, code, -1)
	if err != nil {
		panic(err) // every code above is one go-multihash has
	}
	return h
}

// fxPB is a dag-pb node with our CID prefix.
func fxPB(data []byte) *dag.ProtoNode {
	nd := dag.NodeWithData(data)
	if err := nd.SetCidBuilder(cidPrefix()); err != nil {
		panic(err) // a fixed, valid prefix
	}
	return nd
}

func (b *fxBuilder) link(nd *dag.ProtoNode, name string, e fxEntry) {
	b.links++
	// AddRawLink takes any CID, held or not, and keeps duplicates.
	_ = nd.AddRawLink(name, &ipld.Link{Name: name, Cid: e.c, Size: e.size})
}

// fxModes are the permissions a node may state; the setuid, setgid and
// sticky bits must never reach the disk.
var fxModes = []fs.FileMode{0, 0o644, 0o755, 0, 0o4755 | fs.ModeSetuid, 0o2755 | fs.ModeSetgid, 0o1777 | fs.ModeSticky, 0o444, 0o111, 0o777}

// fxNames are the names a name byte below len(fxNames) picks; one above
// takes up to 7 bytes of input as the name.
var fxNames = []string{
	"", ".", "..", "a/b", "/", "x\x00y", "new\nline", "dup", "dup", "f", "d",
	"outside", "...", " ", "\xff\xfe", strings.Repeat("n", 255), strings.Repeat("n", 256),
	"sentinel", "-", ".wh.x", "../outside", "d/../..",
}

func (b *fxBuilder) name() string {
	i := int(b.byte())
	if i < len(fxNames) {
		return fxNames[i]
	}
	return string(b.take(i % 8))
}

// fxTargets are the symlink targets a target byte below len(fxTargets)
// picks; one above takes up to 15 bytes of input as the target.
var fxTargets = []string{
	"", "/", "/etc/passwd", "..", "../outside/sentinel", ".", "f", "./f", "d/../f",
	"d/../../x", "a/b/c", strings.Repeat("../", 20) + "etc", "x\x00y", "\n",
	strings.Repeat("a/", 2100), "dup", "d/..", "../d", "f/../../outside", "d",
}

// file makes a UnixFS file node over kids. claim picks what its sizes
// state: the truth, one byte more or less, 1 TiB, nothing, or sizes that
// overflow.
func (b *fxBuilder) file(kids []fxEntry, claim byte, data []byte, mode fs.FileMode) {
	typ := ft.TFile
	if claim&0x80 != 0 {
		typ = ft.TRaw
	}
	fsn := ft.NewFSNode(typ)
	fsn.SetData(data)
	var total uint64
	for _, k := range kids {
		fsn.AddBlockSize(k.size)
		total += k.size
	}
	switch claim & 0x7f % 8 {
	case 1:
		fsn.UpdateFilesize(1)
	case 2:
		fsn.UpdateFilesize(-1)
	case 3:
		fsn.UpdateFilesize(1 << 40)
	case 4:
		fsn.RemoveAllBlockSizes()
	case 5:
		fsn.RemoveAllBlockSizes()
		for range kids {
			fsn.AddBlockSize(math.MaxUint64 / 2)
		}
	case 6:
		if len(kids) > 0 {
			fsn.RemoveBlockSize(0)
		}
	}
	if mode != 0 {
		fsn.SetMode(mode)
	}
	pb, err := fsn.GetBytes()
	if err != nil {
		return
	}
	nd := fxPB(pb)
	for _, k := range kids {
		b.link(nd, "", k)
	}
	b.add(nd, fsn.FileSize(), true)
}

func (b *fxBuilder) dir(kids []fxEntry, names []string, mode fs.FileMode) {
	fsn := ft.NewFSNode(ft.TDirectory)
	if mode != 0 {
		fsn.SetMode(mode | fs.ModeDir)
	}
	pb, err := fsn.GetBytes()
	if err != nil {
		return
	}
	nd := fxPB(pb)
	for i, k := range kids {
		b.link(nd, names[i], k)
	}
	b.add(nd, 0, true)
}

// fxFanouts are the fanouts a HAMT may be built with or state; boxo
// accepts powers of two from 8 to 1024.
var fxFanouts = []uint64{256, 8, 16, 1024, 0, 1, 3, 2048, 1 << 40, 64}

// hamt builds a real HAMT shard with boxo over the top k entries.
func (b *fxBuilder) hamt() {
	fanout := fxFanouts[int(b.byte())%4] // only the ones boxo builds
	kids := b.top(int(b.byte() % 9))
	ds := &fxRecorder{DAGService: mdtest.Mock(), b: b}
	sh, err := hamt.NewShard(ds, int(fanout))
	if err != nil {
		return
	}
	sh.SetCidBuilder(cidPrefix())
	ctx := context.Background()
	for _, k := range kids {
		b.links++
		if err := sh.SetLink(ctx, b.name(), &ipld.Link{Cid: k.c, Size: k.size}); err != nil {
			return
		}
	}
	nd, err := sh.Node()
	if err != nil {
		return
	}
	if err := ds.Add(ctx, nd); err != nil {
		return
	}
	b.push(fxEntry{c: nd.Cid()})
}

// fxRecorder keeps every node boxo's HAMT code writes.
type fxRecorder struct {
	ipld.DAGService
	b *fxBuilder
}

func (r *fxRecorder) Add(ctx context.Context, nd ipld.Node) error {
	if _, ok := r.b.nodes[nd.Cid()]; !ok {
		r.b.made++
		r.b.nodes[nd.Cid()] = nd
		r.b.keep = append(r.b.keep, nd)
	}
	return r.DAGService.Add(ctx, nd)
}

func (r *fxRecorder) AddMany(ctx context.Context, nds []ipld.Node) error {
	for _, nd := range nds {
		if err := r.Add(ctx, nd); err != nil {
			return err
		}
	}
	return nil
}

// shard hand-makes a HAMT shard node, so that everything about it can be
// wrong: fanout, hash function, bitfield, link names. A prefix byte picks
// each link's name: the bare hex prefix (a sub-shard), the prefix and a
// name (an entry), or a name shorter than the prefix.
func (b *fxBuilder) shard() {
	fanout := fxFanouts[int(b.byte())%len(fxFanouts)]
	hash := uint64(hamt.HashMurmur3)
	if b.byte()%4 == 3 {
		hash = 0x12 // sha2-256, which HAMTs do not use
	}
	bitfield := b.take(int(b.byte() % 160))
	kids := b.top(int(b.byte() % 9))
	data, err := ft.HAMTShardData(bitfield, fanout, hash)
	if err != nil {
		return
	}
	pad := len(fmt.Sprintf("%X", max(fanout, 1)-1))
	nd := fxPB(data)
	for _, k := range kids {
		p := b.byte()
		prefix := fmt.Sprintf("%0*X", pad, int(p)%int(max(fanout, 1)))
		var name string
		switch p % 3 {
		case 0:
			name = prefix
		case 1:
			name = prefix + b.name()
		default:
			name = prefix[:len(prefix)-1]
		}
		b.link(nd, name, k)
	}
	b.add(nd, 0, true)
}

// root is the top entry, or an empty folder for an empty program.
func (b *fxBuilder) root() cid.Cid {
	if len(b.stack) == 0 {
		b.dir(nil, nil, 0)
	}
	return b.stack[len(b.stack)-1].c
}

// put stores the blocks the program kept: the ones a peer sent.
func (b *fxBuilder) put(tb testing.TB, s *Store) {
	tb.Helper()
	ctx := context.Background()
	w := newDagWriter(ctx, s)
	for _, nd := range b.keep {
		if len(nd.RawData()) > maxBlockSize {
			continue // refused on arrival; a missing block here
		}
		if err := w.Add(ctx, nd); err != nil {
			tb.Fatalf("store block %s: %v", nd.Cid(), err)
		}
	}
	if _, _, err := w.close(); err != nil {
		tb.Fatal(err)
	}
}

// fxNode is an entry of an exported tree, or of the tree a DAG describes.
type fxNode struct {
	kind    entryKind
	perm    fs.FileMode
	content string // a file's bytes or a symlink's target
}

func (n fxNode) String() string {
	return fmt.Sprintf("{kind %d, perm %v, %d bytes %.40q}", n.kind, n.perm, len(n.content), n.content)
}

// expect reads the tree the DAG under root describes with boxo's UnixFS
// code over the blocks the program stored, the way Export should have
// written it: perm bits only, the defaults where a node states none.
func (b *fxBuilder) expect(ctx context.Context, root cid.Cid) (map[string]fxNode, error) {
	ds := mdtest.Mock()
	for _, nd := range b.keep {
		if err := ds.Add(ctx, nd); err != nil {
			return nil, err
		}
	}
	out := map[string]fxNode{}
	var walk func(rel string, c cid.Cid) error
	walk = func(rel string, c cid.Cid) error {
		nd, err := ds.Get(ctx, c)
		if err != nil {
			return err
		}
		if _, ok := nd.(*dag.RawNode); ok {
			out[rel] = fxNode{kind: kindFile, perm: defaultFileMode, content: string(nd.RawData())}
			return nil
		}
		fsn, err := ft.FSNodeFromBytes(nd.(*dag.ProtoNode).Data())
		if err != nil {
			return err
		}
		perm := fsn.Mode().Perm()
		switch fsn.Type() {
		case ft.TSymlink:
			out[rel] = fxNode{kind: kindSymlink, content: string(fsn.Data())}
			return nil
		case ft.TDirectory, ft.THAMTShard:
			if perm == 0 {
				perm = defaultDirMode
			}
			out[rel] = fxNode{kind: kindDir, perm: perm}
			d, err := uio.NewDirectoryFromNode(ds, nd)
			if err != nil {
				return err
			}
			return d.ForEachLink(ctx, func(l *ipld.Link) error {
				return walk(path.Join(rel, l.Name), l.Cid)
			})
		}
		if perm == 0 {
			perm = defaultFileMode
		}
		var buf bytes.Buffer
		if err := fxFileBytes(ctx, ds, nd, &buf); err != nil {
			return err
		}
		out[rel] = fxNode{kind: kindFile, perm: perm, content: buf.String()}
		return nil
	}
	return out, walk(".", root)
}

// fxFileBytes is a file's content as UnixFS lays it out: a node's data,
// then its children's, in link order.
func fxFileBytes(ctx context.Context, ds ipld.DAGService, nd ipld.Node, buf *bytes.Buffer) error {
	pn, ok := nd.(*dag.ProtoNode)
	if !ok {
		buf.Write(nd.RawData())
		return nil
	}
	fsn, err := ft.FSNodeFromBytes(pn.Data())
	if err != nil {
		return err
	}
	buf.Write(fsn.Data())
	for _, l := range pn.Links() {
		child, err := ds.Get(ctx, l.Cid)
		if err != nil {
			return err
		}
		if err := fxFileBytes(ctx, ds, child, buf); err != nil {
			return err
		}
	}
	return nil
}

// fxReadTree reads an exported tree: a file or a folder at dest.
func fxReadTree(t *testing.T, dest string) map[string]fxNode {
	t.Helper()
	out := map[string]fxNode{}
	err := filepath.WalkDir(dest, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dest, p)
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		m := fi.Mode()
		if m&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != 0 {
			t.Errorf("export made %s with mode %v", rel, m)
		}
		switch {
		case m.IsDir():
			out[rel] = fxNode{kind: kindDir, perm: m.Perm()}
			// A folder the DAG made unreadable (0111, 0444) is opened
			// up, so that the walk can go on without root and the
			// test's cleanup can remove it; its mode is recorded first.
			if m.Perm()&0o700 != 0o700 {
				if err := os.Chmod(p, m.Perm()|0o700); err != nil {
					return err
				}
			}
		case m.IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = fxNode{kind: kindFile, perm: m.Perm(), content: string(b)}
		case m&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out[rel] = fxNode{kind: kindSymlink, content: target}
		default:
			t.Errorf("export made %s, of mode %v: neither a file, a folder nor a symlink", rel, m)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("read the exported tree: %v", err)
	}
	return out
}

// fxCheckLinks checks that every symlink of the exported tree resolves,
// link by link as the kernel would follow it, to a path inside dest.
func fxCheckLinks(t *testing.T, dest string, tree map[string]fxNode) {
	t.Helper()
	for rel, n := range tree {
		if n.kind != kindSymlink {
			continue
		}
		if where, ok := fxResolveInside(dest, rel); !ok {
			t.Errorf("symlink %s -> %q leads out of the export: %s", rel, n.content, where)
		}
	}
}

// fxResolveInside follows rel inside root one component at a time, as
// path resolution does, and reports whether it ever leaves root. A
// component that does not exist ends the walk inside (the kernel would
// fail there); so does a loop of links.
func fxResolveInside(root, rel string) (string, bool) {
	var cur []string // the resolved path so far, inside root
	todo := strings.Split(rel, "/")
	for hops := 0; len(todo) > 0; {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(cur) == 0 {
				return "above the root", false
			}
			cur = cur[:len(cur)-1]
			continue
		}
		next := append(slices.Clone(cur), c)
		p := filepath.Join(append([]string{root}, next...)...)
		fi, err := os.Lstat(p)
		if err != nil {
			return "", true
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if hops++; hops > 40 {
			return "", true
		}
		target, err := os.Readlink(p)
		if err != nil {
			return "", true
		}
		if path.IsAbs(target) {
			return "absolute target " + target, false
		}
		todo = append(strings.Split(target, "/"), todo...)
	}
	return "", true
}

// fxCheckTop checks that top holds only the store, the export and the
// untouched sentinel.
func fxCheckTop(t *testing.T, top string) {
	t.Helper()
	ents, err := os.ReadDir(top)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if n := e.Name(); n != "store" && n != "dest" && n != "outside" {
			t.Errorf("export created %s beside its folder", n)
		}
	}
	outside := filepath.Join(top, "outside")
	if ents, err := os.ReadDir(outside); err != nil || len(ents) != 1 || ents[0].Name() != "sentinel" {
		t.Errorf("outside/ changed: %v, %v", ents, err)
	}
	p := filepath.Join(outside, "sentinel")
	if b, err := os.ReadFile(p); err != nil || string(b) != "untouched" {
		t.Errorf("sentinel: %q, %v", b, err)
	}
	if fi, err := os.Lstat(p); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o644 {
		t.Errorf("sentinel is no longer a plain 0644 file: %v, %v", fi, err)
	}
}

func fxSameTree(t *testing.T, want, got map[string]fxNode) {
	t.Helper()
	for rel, w := range want {
		g, ok := got[rel]
		switch {
		case !ok:
			t.Errorf("%s: missing from the export, the DAG has %v", rel, w)
		case g != w:
			t.Errorf("%s: exported %v, the DAG has %v", rel, g, w)
		}
	}
	for rel, g := range got {
		if _, ok := want[rel]; !ok {
			t.Errorf("%s: exported %v, which the DAG does not have", rel, g)
		}
	}
}

// fxProg assembles a FuzzExport program for the seeds.
type fxProg []byte

// op appends an instruction into a new slice, so that programs built on a
// common prefix never share what follows it.
func (p fxProg) op(o fxOp, args ...byte) fxProg {
	q := make(fxProg, 0, len(p)+1+len(args))
	return append(append(append(q, p...), byte(o)), args...)
}

func (p fxProg) raw(data string) fxProg {
	return p.op(fxRaw, append([]byte{byte(len(data))}, data...)...)
}

func (p fxProg) u16(o fxOp, n int, args ...byte) fxProg {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], uint16(n))
	return p.op(o, append(b[:], args...)...)
}

// fxNameByte is the name byte that picks name from fxNames.
func fxNameByte(name string) byte {
	i := slices.Index(fxNames, name)
	if i < 0 {
		panic("no such name: " + name)
	}
	return byte(i)
}

// fxTargetByte is the target byte that picks target from fxTargets.
func fxTargetByte(target string) byte {
	i := slices.Index(fxTargets, target)
	if i < 0 {
		panic("no such target: " + target)
	}
	return byte(i)
}

type fxSeed struct {
	name string
	prog fxProg
}

// fxSeeds are programs for the shapes a hostile DAG takes, and two
// honest ones.
func fxSeeds() []fxSeed {
	var p fxProg
	dirOf := func(p fxProg, names ...string) fxProg {
		args := []byte{byte(len(names))}
		for _, n := range names {
			args = append(args, fxNameByte(n))
		}
		return p.op(fxDir, append(args, 0)...)
	}
	file := p.raw("hello\n").op(fxFile, 1, 0, 0, 0)
	seeds := []fxSeed{
		{"honest", dirOf(file.raw("x").op(fxSymlink, fxTargetByte("f")), "f", "d")},
		{"honest-file", file},
		{"honest-hamt", p.raw("a").raw("b").raw("c").op(fxHAMT, 0, 3, fxNameByte("f"), fxNameByte("d"), fxNameByte("..."))},
		{"empty", nil},
	}
	for _, name := range []string{"a/b", "/", "..", ".", "", "x\x00y", "new\nline", strings.Repeat("n", 256)} {
		seeds = append(seeds, fxSeed{"name " + name, dirOf(file, name)})
	}
	seeds = append(seeds,
		fxSeed{"duplicate names", dirOf(file.op(fxDup), "dup", "dup")},
		fxSeed{"symlink then same name", dirOf(p.raw("x").op(fxDir, 1, fxNameByte("f"), 0).op(fxSymlink, fxTargetByte("d")).op(fxPick, 1), "dup", "dup")},
	)
	for _, target := range []string{"/", "/etc/passwd", "..", "../outside/sentinel", "d/../../x", "f/../../outside", strings.Repeat("a/", 2100), "d/.."} {
		seeds = append(seeds, fxSeed{"symlink " + target, dirOf(p.op(fxSymlink, fxTargetByte(target)), "f")})
	}
	seeds = append(seeds,
		// A file claiming 1 TiB over one small leaf, and one byte more
		// or less than it holds.
		fxSeed{"claims 1 TiB", p.raw("small").op(fxFile, 1, 3, 0, 0)},
		fxSeed{"claims one more", p.raw("small").op(fxFile, 1, 1, 0, 0)},
		fxSeed{"claims one less", p.raw("small").op(fxFile, 1, 2, 0, 0)},
		fxSeed{"no block sizes", p.raw("small").op(fxFile, 1, 4, 0, 0)},
		fxSeed{"sizes overflow", p.raw("small").op(fxDup).op(fxFile, 2, 5, 0, 0)},
		// 1 TiB made of one 1 MiB zero leaf, linked 1024 times by a node
		// linked 1024 times.
		fxSeed{"1 TiB of one zero leaf", p.op(fxZeros, 20).u16(fxRepeat, 1024, 0).u16(fxRepeat, 1024, 0)},
		fxSeed{"missing child", dirOf(p.op(fxMissing, 1, 'x').op(fxFile, 1, 0, 0, 0), "f")},
		fxSeed{"missing root", p.op(fxMissing, 0)},
		fxSeed{"foreign child", dirOf(p.op(fxForeign, 0), "f")},
		fxSeed{"dag-cbor child", p.op(fxForeign, 1).op(fxFile, 1, 0, 0, 0)},
		fxSeed{"10000 links to one empty file", p.raw("").u16(fxManyLinks, 10000, 0)},
		fxSeed{"10000 links one name", p.raw("").u16(fxManyLinks, 10000, 1)},
		fxSeed{"nested 200 deep", p.raw("deep").op(fxNest, 200, fxNameByte("d"))},
		fxSeed{"not unixfs", dirOf(p.op(fxNotUnixFS, 0, 3, 'a', 'b', 'c'), "f")},
		fxSeed{"directory inside a file", p.op(fxDir, 0, 0).op(fxFile, 1, 0, 0, 0)},
		fxSeed{"symlink root", p.op(fxSymlink, fxTargetByte("f"))},
		fxSeed{"setuid file", dirOf(p.raw("x").op(fxFile, 1, 0, 0, 4), "f")},
		fxSeed{"cidv0", dirOf(file.op(fxV0), "f")},
		fxSeed{"shard names twice", p.raw("a").op(fxDup).op(fxShard, 0, 0, 0, 2, 1, fxNameByte("f"), 1, fxNameByte("f"))},
		fxSeed{"shard of shards", p.raw("a").op(fxShard, 1, 0, 0, 1, 1, fxNameByte("f")).op(fxDup).op(fxShard, 1, 0, 0, 2, 0, 3)},
		fxSeed{"sub-shard bomb", fxShardBomb(21)},
		fxSeed{"bad fanout shard", p.raw("a").op(fxShard, 6, 0, 0, 1, 1, fxNameByte("f"))},
		fxSeed{"short shard name", p.raw("a").op(fxShard, 0, 0, 0, 1, 2)},
	)
	return seeds
}

// fxShardBomb is a HAMT of fanout 8 levels deep whose every shard links
// the one below it from all eight slots, over an empty shard: 8^(levels-1)
// sub-shard visits from levels small blocks, and not one entry.
func fxShardBomb(levels int) fxProg {
	var p fxProg
	p = p.op(fxShard, 1, 0, 0, 0) // fanout 8, murmur3, no bitfield, no links
	for range levels - 1 {
		for range 7 {
			p = p.op(fxDup)
		}
		// Eight links, each a bare prefix: sub-shards 0, 3, 6, 1, 4, 7, 2, 5.
		p = p.op(fxShard, 1, 0, 0, 8, 0, 3, 6, 9, 12, 15, 18, 21)
	}
	return p
}
