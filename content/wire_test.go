package content

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/ipfs/go-cid"
	mh "github.com/multiformats/go-multihash"
)

func testCid(t testing.TB, codec uint64, data string) cid.Cid {
	t.Helper()
	h, err := mh.Sum([]byte(data), mh.SHA2_256, -1)
	if err != nil {
		t.Fatal(err)
	}
	return cid.NewCidV1(codec, h)
}

func TestRequestRoundTrip(t *testing.T) {
	root := testCid(t, cid.DagProtobuf, "root")
	for _, r := range []bulkRequest{
		{root: root},
		{root: root, structure: true, wants: []cid.Cid{root}},
		{root: root, wants: []cid.Cid{testCid(t, cid.Raw, "a"), testCid(t, cid.DagProtobuf, "b")}},
	} {
		got, err := decodeRequest(encodeRequest(r))
		if err != nil {
			t.Fatal(err)
		}
		if got.root != r.root || got.structure != r.structure || len(got.wants) != len(r.wants) {
			t.Fatalf("round trip %+v -> %+v", r, got)
		}
		for i := range r.wants {
			if got.wants[i] != r.wants[i] {
				t.Fatalf("want %d: %s != %s", i, got.wants[i], r.wants[i])
			}
		}
	}
}

func TestDecodeRequestRejects(t *testing.T) {
	root := testCid(t, cid.DagProtobuf, "root")
	good := encodeRequest(bulkRequest{root: root, wants: []cid.Cid{root}})
	identity, _ := mh.Sum([]byte("x"), mh.IDENTITY, -1)
	cbor := cid.NewCidV1(cid.DagCBOR, root.Hash())
	bad := map[string][]byte{
		"empty":          nil,
		"version":        append([]byte{2}, good[1:]...),
		"flags":          append([]byte{1, 0x80}, good[2:]...),
		"trailing":       append(bytes.Clone(good), 0),
		"truncated":      good[:len(good)-1],
		"identity hash":  encodeRequest(bulkRequest{root: cid.NewCidV1(cid.Raw, identity)}),
		"cbor codec":     encodeRequest(bulkRequest{root: cbor}),
		"too many wants": binary.AppendUvarint(appendCid([]byte{1, 0}, root), maxWants+1),
		"count > bytes":  binary.AppendUvarint(appendCid([]byte{1, 0}, root), 5),
	}
	for name, b := range bad {
		if _, err := decodeRequest(b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func FuzzDecodeRequest(f *testing.F) {
	root := testCid(f, cid.DagProtobuf, "root")
	leaf := testCid(f, cid.Raw, "leaf")
	f.Add(encodeRequest(bulkRequest{root: root}))
	f.Add(encodeRequest(bulkRequest{root: root, structure: true, wants: []cid.Cid{root, leaf}}))
	f.Add([]byte{})
	f.Add([]byte{1, 0, 0x24})
	f.Add([]byte{1, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeRequest(b)
		if err != nil {
			return
		}
		// Whatever is accepted is canonical: it encodes back to itself.
		if again := encodeRequest(r); !bytes.Equal(again, b) {
			t.Fatalf("decode/encode changed %x to %x", b, again)
		}
		for _, c := range append([]cid.Cid{r.root}, r.wants...) {
			if err := checkCid(c); err != nil {
				t.Fatalf("accepted %s: %v", c, err)
			}
		}
	})
}

func FuzzReadResponse(f *testing.F) {
	f.Add(encodeResponse(bulkResponse{status: statusOK, blocks: 3, bytes: 3 << 20}))
	f.Add(encodeResponse(bulkResponse{status: statusDenied, message: "not a party"}))
	f.Add(encodeResponse(bulkResponse{status: statusOK, blocks: 1, bytes: 1 << 40}))
	f.Add([]byte{9})
	f.Add([]byte{1, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		br := bufio.NewReader(bytes.NewReader(b))
		r, err := readResponse(br)
		if err != nil {
			return
		}
		if r.status == statusOK && r.bytes > r.blocks*maxBlockSize {
			t.Fatalf("accepted %d bytes in %d blocks", r.bytes, r.blocks)
		}
		if len(r.message) > maxMessageLen {
			t.Fatalf("accepted a %d-byte message", len(r.message))
		}
		// The header is read exactly: what follows is left for the CAR.
		consumed := len(b) - br.Buffered()
		if again := encodeResponse(r); !bytes.Equal(again, b[:consumed]) {
			t.Fatalf("decode/encode changed %x to %x", b[:consumed], again)
		}
	})
}
