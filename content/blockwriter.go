package content

import (
	"context"
	"errors"
	"runtime"
	"sync"

	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"
	ipld "github.com/ipfs/go-ipld-format"
)

const (
	// writeBatchBytes is how much a batch gathers before it is committed:
	// large enough that a commit is one sequential value-log append,
	// small enough to bound memory at a few batches.
	writeBatchBytes = 16 << 20
	// writeQueue batches may wait while one is written, so reading the
	// network or a file and hashing overlap with Badger's writes.
	writeQueue = 2
	// hashWorkers bounds the goroutines hashing a received batch.
	hashWorkers = 4
)

// blockWriter writes blocks in batches on its own goroutine. If verify is
// set, a second goroutine hashes each batch first, on several cores, while
// the previous batch is being written: hashing and Badger's value-log
// append are the two largest costs of receiving, and this way neither waits
// for the other nor holds up the goroutine that reads the network.
type blockWriter struct {
	s       *Store
	cache   bool                // write packed blocks through the page cache
	batches chan []blocks.Block // to the hasher, or straight to the writer
	done    chan struct{}       // closed when the writer has finished

	pending      []blocks.Block // owned by the caller's goroutine
	pendingBytes int

	mu      sync.Mutex // guards the fields below
	err     error
	written int
	bytes   int64
}

// writerOptions says how a blockWriter treats blocks.
type writerOptions struct {
	// verify hashes each block: it came from a peer.
	verify bool
	// cache leaves packed blocks in the page cache: they were imported
	// here and are about to be served.
	cache bool
}

func newBlockWriter(s *Store, o writerOptions) *blockWriter {
	verify := o.verify
	w := &blockWriter{
		s:       s,
		cache:   o.cache,
		batches: make(chan []blocks.Block, writeQueue),
		done:    make(chan struct{}),
	}
	toWrite := w.batches
	if verify {
		toWrite = make(chan []blocks.Block, 1)
		go w.hash(toWrite)
	}
	go w.write(toWrite)
	return w
}

func (w *blockWriter) hash(out chan<- []blocks.Block) {
	defer close(out)
	for batch := range w.batches {
		if w.failed() != nil {
			continue // drain so that put never blocks forever
		}
		if err := verifyAll(batch); err != nil {
			w.fail(err)
			continue
		}
		out <- batch
	}
}

func (w *blockWriter) write(in <-chan []blocks.Block) {
	defer close(w.done)
	var idx packIndex
	for batch := range in {
		if w.failed() != nil {
			continue
		}
		n, b, err := w.s.putBlocksPacked(batch, &idx, w.cache)
		w.mu.Lock()
		w.written += n
		w.bytes += b
		if err != nil && w.err == nil {
			w.err = err
		}
		w.mu.Unlock()
	}
	// Even after a failure: what did arrive intact is kept, so that a
	// retry moves only the rest.
	if err := w.s.indexPacked(&idx); err != nil {
		w.fail(err)
	}
}

func (w *blockWriter) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = err
	}
}

// verifyAll hashes blocks on up to hashWorkers goroutines and returns the
// first mismatch.
func verifyAll(bs []blocks.Block) error {
	workers := min(runtime.GOMAXPROCS(0), hashWorkers, len(bs))
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			for j := i; j < len(bs); j += workers {
				if err := verify(bs[j].Cid(), bs[j].RawData()); err != nil {
					errs[i] = err
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (w *blockWriter) failed() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// put queues a block, which the caller has verified unless the writer
// verifies. It returns an earlier write
// error, so a failing disk stops a transfer promptly.
func (w *blockWriter) put(ctx context.Context, b blocks.Block) error {
	if err := w.failed(); err != nil {
		return err
	}
	w.pending = append(w.pending, b)
	w.pendingBytes += len(b.RawData())
	if w.pendingBytes < writeBatchBytes {
		return nil
	}
	return w.flush(ctx)
}

func (w *blockWriter) flush(ctx context.Context) error {
	if len(w.pending) == 0 {
		return nil
	}
	select {
	case w.batches <- w.pending:
	case <-ctx.Done():
		return ctx.Err()
	}
	w.pending, w.pendingBytes = nil, 0
	return nil
}

// close writes what is pending, waits for the writer, and returns how many
// blocks and bytes were newly written (blocks already held are skipped).
func (w *blockWriter) close(ctx context.Context) (int, int64, error) {
	ferr := w.flush(ctx)
	close(w.batches)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.written, w.bytes, w.err
	}
	return w.written, w.bytes, ferr
}

// dagWriter is the DAGService the UnixFS importer writes through. It keeps
// the dag-pb nodes it was given, which are small, so the importer can read
// back a node whose batch is not yet committed.
type dagWriter struct {
	storeDAG
	w     *blockWriter
	ctx   context.Context
	mu    sync.Mutex
	nodes map[cid.Cid]ipld.Node
}

func newDagWriter(ctx context.Context, s *Store) *dagWriter {
	return &dagWriter{
		storeDAG: storeDAG{s},
		w:        newBlockWriter(s, writerOptions{cache: true}), // the importer made the CIDs
		ctx:      ctx,
		nodes:    map[cid.Cid]ipld.Node{},
	}
}

func (d *dagWriter) Get(ctx context.Context, c cid.Cid) (ipld.Node, error) {
	d.mu.Lock()
	nd, ok := d.nodes[c]
	d.mu.Unlock()
	if ok {
		return nd, nil
	}
	return d.storeDAG.Get(ctx, c)
}

func (d *dagWriter) GetMany(ctx context.Context, cs []cid.Cid) <-chan *ipld.NodeOption {
	return getMany(ctx, d, cs)
}

func (d *dagWriter) Add(ctx context.Context, nd ipld.Node) error {
	if err := checkCid(nd.Cid()); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if nd.Cid().Type() == cid.DagProtobuf {
		d.nodes[nd.Cid()] = nd
	}
	return d.w.put(ctx, nd)
}

func (d *dagWriter) AddMany(ctx context.Context, nds []ipld.Node) error {
	for _, nd := range nds {
		if err := d.Add(ctx, nd); err != nil {
			return err
		}
	}
	return nil
}

func (d *dagWriter) close() (int, int64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.w.close(d.ctx)
}
