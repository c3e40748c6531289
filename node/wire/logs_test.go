package wire_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/node/wire/wiretest"
	"github.com/e31network/e31/p2p"
)

func TestCheckLogsRequest(t *testing.T) {
	ok := wire.LogsRequest{Lease: "l", Job: "j", Stream: wire.StreamStdout, Offset: 10, After: []byte("0123456789")}
	if err := wire.CheckLogsRequest(ok); err != nil {
		t.Fatalf("valid request refused: %v", err)
	}
	for name, mut := range map[string]func(*wire.LogsRequest){
		"no lease":          func(r *wire.LogsRequest) { r.Lease = "" },
		"bad stream":        func(r *wire.LogsRequest) { r.Stream = "stdin" },
		"negative offset":   func(r *wire.LogsRequest) { r.Offset = -1 },
		"anchor too long":   func(r *wire.LogsRequest) { r.Offset, r.After = 100, bytes.Repeat([]byte{'a'}, wire.MaxLogAnchor+1) },
		"anchor before 0":   func(r *wire.LogsRequest) { r.Offset = 3 },
		"wait too long":     func(r *wire.LogsRequest) { r.WaitMs = wire.MaxLogWaitMs + 1 },
		"negative tail":     func(r *wire.LogsRequest) { r.TailLines = -1 },
		"tail out of range": func(r *wire.LogsRequest) { r.TailLines = wire.MaxLogTailLines + 1 },
	} {
		r := ok
		mut(&r)
		if err := wire.CheckLogsRequest(r); !errors.Is(err, wire.ErrBadLogs) {
			t.Errorf("%s: %v, want ErrBadLogs", name, err)
		}
	}
}

// FuzzLogsRequest feeds the provider's decoder of a follower's request: an
// accepted request stays within the bounds that keep a reply in one frame
// and a handler within its timeout, and survives a round trip.
func FuzzLogsRequest(f *testing.F) {
	terms := wiretest.Terms(wiretest.SeededParty(f, 1).ID, wiretest.SeededParty(f, 2).ID)
	for _, r := range []wire.LogsRequest{
		{Lease: terms.ID, Job: terms.Job, Stream: wire.StreamStdout},
		{Lease: terms.ID, Job: terms.Job, Stream: wire.StreamStderr, TailLines: 50, WaitMs: 5000},
		{Lease: terms.ID, Job: terms.Job, Stream: wire.StreamStdout, Offset: 1 << 20, After: []byte("epoch 12 loss 0.31\n"), WaitMs: 5000},
	} {
		f.Add(mustMarshal(f, r))
	}
	f.Add([]byte(`{"lease":"a","job":"b","stream":"stdout","offset":-1}`))
	f.Add([]byte(`{"lease":"a","job":"b","stream":"stdout","offset":1e3,"after":"AAAA"}`))
	f.Add([]byte(`{"lease":"a","job":"b","stream":"stdout","wait_ms":99999999999}`))
	f.Add([]byte(`{"lease":"a","job":"b","stream":"stdout","pad":1}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := wire.DecodeLogsRequest(body)
		if err != nil {
			return
		}
		if len(r.After) > wire.MaxLogAnchor || int64(len(r.After)) > r.Offset || r.WaitMs > wire.MaxLogWaitMs || r.WaitMs < 0 {
			t.Fatalf("accepted out of bounds: %+v", r)
		}
		enc, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		back, err := wire.DecodeLogsRequest(enc)
		if err != nil {
			t.Fatalf("%s does not decode again: %v", enc, err)
		}
		if back.Offset != r.Offset || !bytes.Equal(back.After, r.After) || back.Stream != r.Stream {
			t.Fatalf("changed on a round trip: %+v to %+v", r, back)
		}
	})
}

// FuzzLogsReply feeds the submitter's decoder of a provider's reply: an
// accepted reply never claims bytes past the log's size or over a chunk.
func FuzzLogsReply(f *testing.F) {
	for _, r := range []wire.LogsReply{
		{},
		{Offset: 0, Data: []byte("hello\n"), Size: 6},
		{Offset: 10, Data: []byte("x"), Size: 20, Dropped: true},
		{Offset: 6, Size: 6, Ended: true},
	} {
		f.Add(mustMarshal(f, r))
	}
	f.Add([]byte(`{"offset":5,"data":"aGVsbG8K","size":6}`))
	f.Add([]byte(`{"offset":0,"size":-1}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := wire.DecodeLogsReply(body)
		if err != nil {
			return
		}
		if r.Offset < 0 || r.Offset+int64(len(r.Data)) > r.Size || len(r.Data) > wire.MaxLogChunk {
			t.Fatalf("accepted out of bounds: offset %d, %d bytes, size %d", r.Offset, len(r.Data), r.Size)
		}
		// A reply fits a frame with room for the protocol's envelope.
		if b := mustMarshal(t, r); len(b) > p2p.MaxFrame-1024 {
			t.Fatalf("reply of %d bytes does not fit a frame", len(b))
		}
	})
}
