package content

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	dag "github.com/ipfs/boxo/ipld/merkledag"
	ft "github.com/ipfs/boxo/ipld/unixfs"
	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"
	ipld "github.com/ipfs/go-ipld-format"
	carv2 "github.com/ipld/go-car/v2"
	"github.com/ipld/go-car/v2/storage"
)

// writeCAR writes a CAR of the blocks with the roots named: v1 to a
// buffer, or v2, which needs to seek, to a file.
func writeCAR(t *testing.T, v2 bool, roots []cid.Cid, bs ...blocks.Block) []byte {
	t.Helper()
	ctx := context.Background()
	var buf bytes.Buffer
	var car storage.WritableCar
	var err error
	path := filepath.Join(t.TempDir(), "x.car")
	if v2 {
		f, ferr := os.Create(path)
		if ferr != nil {
			t.Fatal(ferr)
		}
		defer f.Close()
		car, err = storage.NewWritable(f, roots)
	} else {
		car, err = storage.NewWritable(&buf, roots, carv2.WriteAsCarV1(true))
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bs {
		if err := car.Put(ctx, b.Cid().KeyString(), b.RawData()); err != nil {
			t.Fatal(err)
		}
	}
	if err := car.Finalize(); err != nil {
		t.Fatal(err)
	}
	if !v2 {
		return buf.Bytes()
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// PutCAR stores what an honest import never makes, a directory whose
// child never comes and whose names are unsafe, and pins it as it is;
// Pin would refuse it, PinIncomplete takes it.
func TestPutCARStoresIncompleteDAG(t *testing.T) {
	ctx := context.Background()
	for _, v2 := range []bool{false, true} {
		s := openStore(t, t.TempDir())
		leaf := dag.NewRawNode([]byte("here\n"))
		absent := dag.NewRawNode([]byte("never sent\n"))
		dir := dag.NodeWithData(ft.FolderPBData())
		if err := dir.SetCidBuilder(cidPrefix()); err != nil {
			t.Fatal(err)
		}
		for name, n := range map[string]ipld.Node{"../up": leaf, "a/b": absent} {
			if err := dir.AddNodeLink(name, n); err != nil {
				t.Fatal(err)
			}
		}
		roots, err := s.PutCAR(ctx, bytes.NewReader(writeCAR(t, v2, []cid.Cid{dir.Cid()}, dir, leaf)), "debug")
		if err != nil {
			t.Fatalf("v2 %v: %v", v2, err)
		}
		if !slices.Equal(roots, []cid.Cid{dir.Cid()}) {
			t.Fatalf("roots %v, want %s", roots, dir.Cid())
		}
		pins, err := s.Pins(ctx)
		if err != nil || len(pins) != 1 || pins[0].Root != dir.Cid() || !slices.Equal(pins[0].Reasons, []string{"debug"}) {
			t.Fatalf("pins %+v, %v", pins, err)
		}
		if ok, err := s.Has(ctx, dir.Cid()); ok || err != nil {
			t.Fatalf("Has = %v, %v; want an incomplete DAG", ok, err)
		}
		if err := s.Pin(ctx, dir.Cid(), "job"); !errors.Is(err, ErrIncomplete) {
			t.Fatalf("Pin: %v, want ErrIncomplete", err)
		}
		if err := s.PinIncomplete(ctx, dir.Cid(), "job"); err != nil {
			t.Fatal(err)
		}
		// The blocks it holds are indexed under the root: the exchange
		// serves them to a peer allowed it.
		found, err := s.rootsOf(ctx, leaf.Cid(), func(r cid.Cid) bool { return r == dir.Cid() })
		if err != nil || !found {
			t.Fatalf("leaf indexed under the root: %v, %v", found, err)
		}
		if _, err := s.GC(ctx); err != nil {
			t.Fatal(err)
		}
		if _, held, err := s.blockSize(leaf.Cid()); err != nil || !held {
			t.Fatalf("GC took the leaf of a pinned DAG: %v, %v", held, err)
		}
	}
}

// A block must still hash to its CID, and a CAR must be one.
func TestPutCARRefusesBadBlocks(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
	good := dag.NewRawNode([]byte("good"))
	forged, err := blocks.NewBlockWithCid([]byte("not the bytes of that CID"), good.Cid())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutCAR(ctx, bytes.NewReader(writeCAR(t, false, []cid.Cid{good.Cid()}, forged)), "debug"); !errors.Is(err, ErrInvalidData) {
		t.Errorf("forged block: %v, want ErrInvalidData", err)
	}
	if _, err := s.PutCAR(ctx, bytes.NewReader([]byte("not a car at all")), "debug"); !errors.Is(err, ErrBadCAR) {
		t.Errorf("not a CAR: %v, want ErrBadCAR", err)
	}
	if pins, err := s.Pins(ctx); err != nil || len(pins) != 0 {
		t.Errorf("pins after refusals: %+v, %v", pins, err)
	}
}
