package content

import "errors"

// Sentinel errors that callers branch on. Functions wrap them with the
// details (which block, which peer, which path).
var (
	// ErrInvalidData means a block's bytes do not hash to its CID, or a
	// node that does hash right is not valid dag-pb or UnixFS: the local
	// disk or the sending peer is damaged or lying.
	ErrInvalidData = errors.New("content: data does not match its hash")

	// ErrNotFound means a block or pin is not held locally.
	ErrNotFound = errors.New("content: not found")

	// ErrIncomplete means some blocks of a DAG are missing.
	ErrIncomplete = errors.New("content: DAG is incomplete")

	// ErrTooLarge means an import would exceed the caller's size cap.
	ErrTooLarge = errors.New("content: too large")

	// ErrUnsupported means the input or DAG uses something this package
	// refuses on purpose: symlinks, device files, codecs other than dag-pb
	// and raw, hashes other than sha2-256.
	ErrUnsupported = errors.New("content: unsupported")

	// ErrUnsafeName means a DAG names an entry in a way that could write
	// outside the export directory ("..", "a/b", "").
	ErrUnsafeName = errors.New("content: unsafe name in DAG")

	// ErrDenied means the peer refused to serve the DAG to us.
	ErrDenied = errors.New("content: peer denied access")

	// ErrStalled means no block arrived within the stall timeout.
	ErrStalled = errors.New("content: transfer stalled")

	// ErrClosed means the Store or Exchange has been closed.
	ErrClosed = errors.New("content: closed")
)
