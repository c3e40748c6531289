package submitter

import (
	"context"
	"log/slog"
	"time"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/content/image"
	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/node/state"
	"github.com/e31network/e31/node/view"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/prometheus/client_golang/prometheus"
)

// What the submitter needs from the rest of the node.
type (
	// Store is the local content store (content.Store). Every method is
	// part of it, none found by type assertion: a store without Size
	// would leave every input unsized, one without Resolve refuse every
	// CID/PATH source, one without Open lose the logs that came back with
	// an output, each in silence.
	Store interface {
		Import(ctx context.Context, path string, o content.ImportOptions) (cid.Cid, int64, error)
		Pin(ctx context.Context, root cid.Cid, reason string) error
		Unpin(ctx context.Context, root cid.Cid, reason string) error
		// Size says how many bytes a DAG held here takes.
		Size(ctx context.Context, root cid.Cid) (int64, error)
		// Folder links DAGs held here into a folder: an array's outputs,
		// one entry a task.
		Folder(ctx context.Context, entries []content.FolderEntry, reason string) (cid.Cid, error)
		// LogStore finds a file or folder inside a DAG held here
		// (Resolve) and reads a file (Open).
		LogStore
	}
	// Fetcher fetches a DAG from a peer (content.Exchange).
	Fetcher interface {
		Fetch(ctx context.Context, from peer.ID, root cid.Cid, o content.FetchOptions) (content.FetchStats, error)
	}
	// Ledger stores receipts (ledger.Ledger).
	Ledger interface {
		Append(ctx context.Context, r ledger.Receipt) (ledger.Entry, error)
		AppendOneSided(ctx context.Context, r ledger.Receipt) (ledger.Entry, error)
		RecordDispute(ctx context.Context, lease string, ours, theirs ledger.Receipt) (ledger.Entry, error)
		Lease(ctx context.Context, lease string) (ledger.LeaseRecord, error)
		ByLease(ctx context.Context, lease string) ([]ledger.Entry, error)
		HeldByJobs(ctx context.Context, policy ledger.Policy, jobs ...string) (ledger.JobHeld, error)
		KeepLease(ctx context.Context, ev ledger.LeaseEvidence) error
		// KeepVerdict keeps a signed verdict on replicas this node
		// compared: each lost lease is not owed from then on.
		KeepVerdict(ctx context.Context, v ledger.Verdict) error
		// ProviderRecords is what this node's ledger saw of each provider
		// (verify.min_record reads how many leases it completed).
		ProviderRecords(ctx context.Context) (map[peer.ID]ledger.ProviderRecord, error)
	}
	// Caller sends a request over a direct stream and reads the reply.
	Caller interface {
		Call(ctx context.Context, to peer.ID, proto protocol.ID, req, resp any) error
	}
	// Publisher publishes on a gossip topic (p2p.Gossip).
	Publisher interface {
		Publish(ctx context.Context, topic, kind string, body any) (p2p.Signed, error)
		PublishRaw(ctx context.Context, topic string, raw []byte) error
	}
	// Offers is the offer view (view.Offers).
	Offers interface {
		Get(provider string) (view.OfferEntry, bool)
	}
	// Leases tells which leases the network has heard of (view.Market).
	Leases interface {
		LeaseParties(id string) (provider, submitter string, ok bool)
	}
	// Access grants peers the right to fetch content (acl.List).
	Access interface {
		Allow(p peer.ID, root cid.Cid)
	}
	// Images imports the image a declaration names (images.Library).
	Images interface {
		Import(ctx context.Context, ref string, progress content.Progress) (image.Record, error)
	}
	// Records persists job records (state.Store).
	Records interface {
		Put(prefix, id string, v any) error
		PutAll(prefix string, items []state.Item) error
		Each(prefix string, fn func(b []byte) error) error
		Get(prefix, id string, v any) (bool, error)
		Delete(prefix, id string) error
	}
)

// Config holds the submitter's settings; see node.Config.
type Config struct {
	ProposalTTL       time.Duration
	Heartbeat         time.Duration
	OutputTimeout     time.Duration
	ProviderLostAfter time.Duration
	MaxInputBytes     int64
	MaxOutputBytes    int64
	// RequeueEvery is how often queued jobs are re-announced.
	RequeueEvery time.Duration
	// TaskBatchEvery is how often the leases and releases of this node's
	// arrays' tasks are announced, together (taskbatch.go).
	TaskBatchEvery time.Duration
	// NoLocality and LocalityWait fill in request.locality and
	// request.locality_wait of a declaration that sets neither (the
	// daemon's --no-locality and --locality-wait). They go into the signed
	// declaration, so every peer matches the job alike.
	NoLocality   bool
	LocalityWait time.Duration
	// AvoidAfter is how long a provider that Match keeps assigning a
	// queued job may go without proposing before the job avoids it; zero:
	// never.
	AvoidAfter time.Duration
	// AvoidFor is how long a provider's first avoid for a job lasts; each
	// later one lasts twice the one before, up to wire.MaxAvoidFor. Zero:
	// DefaultAvoidFor.
	AvoidFor time.Duration
	// RunWithin is how long a lease may go with neither the run started
	// nor a receipt offered before the submitter releases it, as never
	// run, and puts the job back in the queue avoiding the provider; zero:
	// never.
	RunWithin time.Duration
	// ReceiptsDue is how long a lease that reached its run may go without
	// a receipt to countersign before the submitter ends it on its side;
	// zero: never.
	ReceiptsDue time.Duration
	// MoveAfter is how long a job waits in a class market whose digest
	// shows no room for it before it moves to one whose digest does
	// (move.go); zero: market.MoveAfter.
	MoveAfter time.Duration
}

// Deps are the parts of the node the submitter acts through.
type Deps struct {
	Key     crypto.PrivKey
	Self    peer.ID
	Store   Store
	Fetcher Fetcher
	Ledger  Ledger
	Calls   Caller
	Gossip  Publisher
	Offers  Offers
	Leases  Leases
	Access  Access
	Records Records
	// Images is nil on a node that cannot import images: a declaration
	// with work.image is then refused.
	Images  Images
	Metrics *Metrics
	Log     *slog.Logger
	// Path says how this node is connected to a peer and, when only
	// through a relay, which (one that carries data) or what the last hole
	// punch said; nil: always direct.
	Path func(peer.ID) (p2p.Path, string)
	// Addrs are this node's addresses, put in each declaration so that
	// providers can reach it with a proposal.
	Addrs func() []string
	// Markets chooses the class market each job is declared in, which
	// its declaration names; nil where the network is not split by class:
	// a declaration then names none.
	Markets *Markets
	// Placement says whether this node's Match, on its view as it stands,
	// gives a job to a provider: a proposal no epoch's pass of this node
	// gave the provider is countersigned only if it does (claims.go).
	// nil: only epoch passes count.
	Placement Placement
	// Reach connects to a peer, unless connected already: before a
	// provider that has not proposed is avoided, this node tries to reach
	// it, for one that cannot reach this node is no squatter. nil: never
	// tried.
	Reach func(ctx context.Context, p peer.ID) error
	// TaskNotQueued, when set, is told by Recover of each task of this
	// node's arrays (and part of its gangs) that is not queued: with its
	// lease while one holds it, else (lease nil) ended at at. The node's
	// view of the network's queue starts empty at each start, and an
	// array is re-announced as one declaration for all its tasks: without
	// this, the view would hold every task open, and this node's Match,
	// which judges the proposals of its tasks, would give out tasks that
	// ended and refuse every provider placing those that did not.
	TaskNotQueued func(task string, lease *wire.SignedLease, at time.Time)
}

// Metrics are the submitter's counters, registered by the node.
type Metrics struct {
	Submitted     prometheus.Counter
	Rejected      prometheus.Counter
	Receipts      prometheus.Counter
	PersistErrors prometheus.Counter
	Returned      content.Progress
	// RoundsLost counts the epoch passes of this node's Match that
	// assigned one of its queued jobs to a provider when the job was
	// still queued at the next epoch's pass: no lease came of that round
	// (market/doc.go, "Claims"). nil: uncounted.
	RoundsLost prometheus.Counter
	// Panics counts the panics recovered in the submitter's goroutines
	// (e31_panics_total{where="task"}); nil: uncounted.
	Panics prometheus.Counter
}
