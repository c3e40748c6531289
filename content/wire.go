package content

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-varint"
)

// The bulk protocol. The requester opens a stream, writes one request and
// closes its write side; the server answers with a response header and, if
// the status is OK, a CARv1 stream of the requested blocks in depth-first
// order (a parent always before its children), then closes.
//
//	request  = version:byte(1) flags:byte root:cidField count:uvarint want:cidField*count
//	cidField = len:uvarint bytes:len
//	response = status:byte ( OK: blocks:uvarint bytes:uvarint
//	                       | other: len:uvarint message:len )
//
// A request names the DAG (root, which access is checked against) and the
// roots of the subtrees the requester lacks (wants); the server sends each
// wanted subtree that lies inside root's DAG, whole. With flagStructure it
// sends only the dag-pb nodes of those subtrees, not the raw leaves: the
// requester first fetches the structure, sees which leaves it already holds
// (from an earlier, interrupted fetch or from another DAG sharing files),
// and then asks for exactly the missing leaves.
const (
	bulkVersion = 1

	flagStructure = 1 << 0 // send dag-pb nodes only

	// maxWants bounds a request. A requester missing more subtrees than
	// this asks for the whole DAG and skips writing what it holds.
	maxWants = 1 << 16
	// maxCidLen is generous for a CIDv1 with a sha2-256 multihash (36
	// bytes); it bounds what a stranger can make us buffer before the
	// access check to a few MiB.
	maxCidLen       = 64
	maxRequestBytes = 2 + 2*binary.MaxVarintLen64 + (maxWants+1)*(binary.MaxVarintLen64+maxCidLen)
	maxMessageLen   = 1024
	// maxBlocks is far above any real DAG (2^40 blocks of 1 MiB is an
	// exabyte) and keeps size arithmetic on the header from overflowing.
	maxBlocks = 1 << 40
)

type bulkStatus byte

const (
	statusOK         bulkStatus = 0
	statusDenied     bulkStatus = 1 // not a party to the DAG's job or lease
	statusNotFound   bulkStatus = 2 // the server does not hold the whole DAG
	statusBadRequest bulkStatus = 3
	statusInvalid    bulkStatus = 4 // the server's own copy fails its hash check
	statusError      bulkStatus = 5
)

type bulkRequest struct {
	structure bool
	root      cid.Cid
	wants     []cid.Cid
}

type bulkResponse struct {
	status  bulkStatus
	blocks  uint64
	bytes   uint64
	message string
}

var errMalformed = errors.New("malformed message")

func encodeRequest(r bulkRequest) []byte {
	var flags byte
	if r.structure {
		flags |= flagStructure
	}
	b := []byte{bulkVersion, flags}
	b = appendCid(b, r.root)
	b = binary.AppendUvarint(b, uint64(len(r.wants)))
	for _, c := range r.wants {
		b = appendCid(b, c)
	}
	return b
}

func appendCid(b []byte, c cid.Cid) []byte {
	cb := c.Bytes()
	b = binary.AppendUvarint(b, uint64(len(cb)))
	return append(b, cb...)
}

// decodeRequest parses a request from an untrusted peer. It accepts only
// CIDs we would walk (checkCid) and nothing after the last want.
func decodeRequest(b []byte) (bulkRequest, error) {
	var r bulkRequest
	if len(b) < 2 || b[0] != bulkVersion {
		return r, fmt.Errorf("%w: unknown version", errMalformed)
	}
	if b[1]&^flagStructure != 0 {
		return r, fmt.Errorf("%w: unknown flags 0x%x", errMalformed, b[1])
	}
	r.structure = b[1]&flagStructure != 0
	b = b[2:]
	var err error
	if r.root, b, err = readCid(b); err != nil {
		return r, fmt.Errorf("root: %w", err)
	}
	// Varints are read with go-varint, which refuses non-minimal
	// encodings: every accepted message has exactly one encoding.
	n, k, err := varint.FromUvarint(b)
	if err != nil || n > maxWants {
		return r, fmt.Errorf("%w: bad want count", errMalformed)
	}
	b = b[k:]
	if n > uint64(len(b)) { // each want takes at least one byte
		return r, fmt.Errorf("%w: want count %d exceeds message", errMalformed, n)
	}
	r.wants = make([]cid.Cid, 0, n)
	for i := range n {
		var c cid.Cid
		if c, b, err = readCid(b); err != nil {
			return r, fmt.Errorf("want %d: %w", i, err)
		}
		r.wants = append(r.wants, c)
	}
	if len(b) != 0 {
		return r, fmt.Errorf("%w: %d trailing bytes", errMalformed, len(b))
	}
	return r, nil
}

func readCid(b []byte) (cid.Cid, []byte, error) {
	n, k, err := varint.FromUvarint(b)
	if err != nil || n == 0 || n > maxCidLen || n > uint64(len(b)-k) {
		return cid.Undef, nil, fmt.Errorf("%w: bad CID length", errMalformed)
	}
	b = b[k:]
	c, err := cid.Cast(b[:n])
	if err != nil {
		return cid.Undef, nil, fmt.Errorf("%w: %v", errMalformed, err)
	}
	if err := checkCid(c); err != nil {
		return cid.Undef, nil, err
	}
	return c, b[n:], nil
}

func encodeResponse(r bulkResponse) []byte {
	b := []byte{byte(r.status)}
	if r.status == statusOK {
		b = binary.AppendUvarint(b, r.blocks)
		return binary.AppendUvarint(b, r.bytes)
	}
	msg := r.message
	if len(msg) > maxMessageLen {
		msg = msg[:maxMessageLen]
	}
	b = binary.AppendUvarint(b, uint64(len(msg)))
	return append(b, msg...)
}

// readResponse reads a response header from an untrusted peer, consuming
// exactly the header so the CAR stream can follow.
func readResponse(r *bufio.Reader) (bulkResponse, error) {
	var resp bulkResponse
	st, err := r.ReadByte()
	if err != nil {
		return resp, err
	}
	resp.status = bulkStatus(st)
	if resp.status == statusOK {
		if resp.blocks, err = varint.ReadUvarint(r); err != nil {
			return resp, fmt.Errorf("%w: block count: %v", errMalformed, err)
		}
		if resp.bytes, err = varint.ReadUvarint(r); err != nil {
			return resp, fmt.Errorf("%w: byte count: %v", errMalformed, err)
		}
		if resp.blocks > maxBlocks || resp.bytes > resp.blocks*maxBlockSize {
			return resp, fmt.Errorf("%w: %d bytes in %d blocks", errMalformed, resp.bytes, resp.blocks)
		}
		return resp, nil
	}
	if resp.status > statusError {
		return resp, fmt.Errorf("%w: unknown status %d", errMalformed, st)
	}
	n, err := varint.ReadUvarint(r)
	if err != nil || n > maxMessageLen {
		return resp, fmt.Errorf("%w: bad message length", errMalformed)
	}
	msg := make([]byte, n)
	if _, err := io.ReadFull(r, msg); err != nil {
		return resp, fmt.Errorf("%w: message: %v", errMalformed, err)
	}
	resp.message = string(msg)
	return resp, nil
}
