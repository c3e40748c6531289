package provider

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/exec"
	"github.com/e31network/e31/exec/gpuprobe"
	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/diskroom"
	"github.com/e31network/e31/node/view"
	"github.com/e31network/e31/p2p"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/prometheus/client_golang/prometheus"
)

// What the provider needs from the rest of the node, each as small as it
// can be.
type (
	// Runner runs a job in its sandbox (exec.Runner).
	Runner interface {
		Run(ctx context.Context, s exec.Spec) (exec.Result, error)
		Cleanup(ctx context.Context, id, dir string) error
		Sweep(ctx context.Context, keep func(id string) bool) error
	}
	// Images turns an image's DAG into a root for the runner
	// (images.Library).
	Images interface {
		Pull(ctx context.Context, pinnedRef, pin string) (cid.Cid, error)
		Prepare(ctx context.Context, root cid.Cid) (*exec.ImageRoot, func(), error)
	}
	// Store is the local content store (content.Store).
	Store interface {
		Import(ctx context.Context, path string, o content.ImportOptions) (cid.Cid, int64, error)
		Export(ctx context.Context, root cid.Cid, dest string, o content.ExportOptions) error
		Resolve(ctx context.Context, root cid.Cid, path string) (cid.Cid, error)
		Unpin(ctx context.Context, root cid.Cid, reason string) error
		Pins(ctx context.Context) ([]content.Pin, error)
		GC(ctx context.Context) (int, error)
	}
	// Fetcher fetches a DAG from a peer (content.Exchange).
	Fetcher interface {
		Fetch(ctx context.Context, from peer.ID, root cid.Cid, o content.FetchOptions) (content.FetchStats, error)
		FetchFrom(ctx context.Context, sources []peer.ID, root cid.Cid, o content.FetchOptions) (content.FetchStats, error)
	}
	// Disks makes and removes the filesystem that bounds what one job
	// writes (exec.MountDisk and its kin).
	Disks interface {
		Mount(ctx context.Context, dir string, bytes uint64) (exec.Disk, error)
		Remove(dir string) error
		Sweep(root string, keep func(id string) bool) error
	}
	// Room is the disk a provider lends its jobs (diskroom.Room).
	Room interface {
		Hold(key string, need diskroom.Need) error
		Signed(key, lease, image string)
		Drop(key string)
		Staged(lease string)
		Imported(lease string)
		Release(lease string)
		Offered() (maxJobDisk uint64, noDisk string)
		Watch(ctx context.Context, short func())
	}
	// Ledger stores receipts (ledger.Ledger).
	Ledger interface {
		Append(ctx context.Context, r ledger.Receipt) (ledger.Entry, error)
		AppendOneSided(ctx context.Context, r ledger.Receipt) (ledger.Entry, error)
		RecordDispute(ctx context.Context, lease string, ours, theirs ledger.Receipt) (ledger.Entry, error)
		ByLease(ctx context.Context, lease string) ([]ledger.Entry, error)
		KeepLease(ctx context.Context, ev ledger.LeaseEvidence) error
	}
	// Caller sends a request over a direct stream and reads the reply.
	Caller interface {
		Call(ctx context.Context, to peer.ID, proto protocol.ID, req, resp any) error
	}
	// Publisher publishes on a gossip topic (p2p.Gossip).
	Publisher interface {
		Publish(ctx context.Context, topic, kind string, body any) (p2p.Signed, error)
	}
	// Jobs is the market view's open jobs (view.Market).
	Jobs interface {
		Job(id string) (*view.OpenJob, bool)
		Decline(id string, by peer.ID, now time.Time)
	}
	// Access grants peers the right to fetch content (acl.List).
	Access interface {
		Allow(p peer.ID, root cid.Cid)
	}
	// Records persists lease records (state.Store).
	Records interface {
		Put(prefix, id string, v any) error
		Each(prefix string, fn func(b []byte) error) error
		Delete(prefix, id string) error
	}
	// AddrBook keeps the addresses of peers to dial.
	AddrBook interface {
		AddAddrs(p peer.ID, addrs []string)
	}
)

// Config holds the provider's settings; see node.Config for their meaning
// and defaults.
type Config struct {
	DataDir string // lease folders go under DataDir/leases
	// Price is what an hour of one of this node's GPUs costs, as its
	// offer names it (e31d --price): every lease it proposes says it.
	Price market.Price
	// Hours, when set, are the only times this node lends its GPUs
	// (hours.go); nil: always.
	Hours Hours
	// GangStartWithin bounds how long a staged gang part waits for its
	// gang lease; default DefaultGangStartWithin.
	GangStartWithin time.Duration
	ProposalTTL     time.Duration
	ReceiptInterval time.Duration
	Grace           time.Duration
	OutputTimeout   time.Duration
	Retention       time.Duration
	// EventTimeout bounds telling the submitter of a step or checkpoint.
	EventTimeout time.Duration
	// ReceiptTimeout bounds one receipt exchange with the submitter.
	ReceiptTimeout time.Duration
	// ImagePull pulls an image from its registry (work.image_ref) instead
	// of fetching it from the submitter, when the declaration has one.
	ImagePull bool
	// RequireImage takes only jobs that bring their own image.
	RequireImage bool
	// MaxJobDisk caps a job's request.disk where there is no Deps.Room,
	// which says what it can grant; 0: no cap.
	MaxJobDisk uint64
	// NoCPUJobs takes only jobs that ask for GPUs; the offer says so.
	NoCPUJobs bool
	// SingleSource stages inputs from the submitter alone, not also from
	// the other providers that hold them.
	SingleSource bool
	// Limits caps each input and checkpoint this node lays out (MaxBytes:
	// also what one fetch may move) and, but for MaxBytes, which is the
	// job's request.disk there, each output and checkpoint it imports.
	Limits content.Limits
	// Prestage starts fetching a job's inputs as soon as Match reserves
	// this provider for it, before the lease; and, for a job Match gives
	// it now whose inputs it lacks, fetches them before proposing the
	// lease (sources.go).
	Prestage bool
}

// Deps are the parts of the node the provider acts through.
type Deps struct {
	Key    crypto.PrivKey
	Self   peer.ID
	GPUs   []exec.GPU
	Runner Runner // nil: no sandbox, so nothing is proposed
	// Images is nil where image jobs cannot run: none is proposed.
	Images Images
	// Disks is nil where a job's writes cannot be bounded: it then
	// writes on the lease directory's filesystem, bounded by nothing.
	Disks Disks
	// Room grants each job its disk out of the data dir's free space, and
	// says what the offer can grant (room.go). Nil: disk is not counted,
	// and Config.MaxJobDisk alone caps a job's.
	Room     Room
	Store    Store
	Fetcher  Fetcher
	Ledger   Ledger
	Calls    Caller
	Gossip   Publisher
	Jobs     Jobs
	Access   Access
	Records  Records
	AddrBook AddrBook
	Metrics  *Metrics
	Log      *slog.Logger
	// SeeGPUs asks the driver, just before a run, which GPUs the machine
	// has now, by UUID and model. Nil: the GPUs found at start.
	SeeGPUs func(ctx context.Context) []exec.GPU
	// ProbeGPUs runs the GPU probe (exec/gpuprobe) on gpus inside a
	// sandbox, before a lease's run (probe.go). Nil: real GPUs are not
	// probed; simulated ones always answer with their simulated identity.
	ProbeGPUs func(ctx context.Context, gpus []exec.GPU) (gpuprobe.Report, error)
	// OpenGang makes a gang part's private network (gang.go). Nil: gang
	// parts end failed, the provider's doing.
	OpenGang OpenGang
	// OfferChanged is called whenever the GPUs' state changes, so that the
	// node publishes its offer at once where the lease's own announcement
	// does not say as much (node.publishOffers). It must not block.
	OfferChanged func()
	// HeldElsewhere reports whether another provider's offer lists every
	// one of roots among its holdings. Nil: none does.
	HeldElsewhere func(roots []string) bool
	// Rematch asks for a pass at once: a job this provider staged before
	// proposing its lease is ready to propose. Nil: the next epoch's pass.
	// It must not block.
	Rematch func()
	// Path says how this node is connected to a peer and, when only
	// through a relay, which (one that carries data) or why (the last hole
	// punch). Nil: always directly.
	Path func(peer.ID) (p2p.Path, string)
	// Misbehave breaks the protocol on purpose, for tests of the
	// defences; nil in every default daemon.
	Misbehave Misbehaviour
}

// Misbehaviour is how a test build makes a provider break the protocol in
// the ways a stranger might (cmd/e31d, build tag byzantine). Each method is
// asked at the point where an honest provider acts.
type Misbehaviour interface {
	// Propose reports whether to propose for a job Match assigned; false
	// squats on the assignment.
	Propose(job string) bool
	// Announce reports whether to announce a lease both sides signed.
	Announce(lease string) bool
	// Run reports whether to carry a signed lease through its run.
	Run(lease string) bool
	// Receipts reports whether to offer receipts for countersigning.
	Receipts() bool
	// Silent reports whether to stop publishing anything, offers included.
	Silent() bool
	// Model is the model the offer shows for a device of model real.
	Model(real string) string
	// Work reports whether to run the job's command at all; false ends
	// the run at once, exit 0, with an empty output.
	Work(lease string) bool
	// Output may change the output folder dir after the run, before it is
	// imported.
	Output(lease, dir string) error
}

// Metrics are the provider's counters, registered by the node.
type Metrics struct {
	Leases        prometheus.Counter
	Receipts      prometheus.Counter
	PersistErrors prometheus.Counter
	Staged        content.Progress
	// Prestaged counts input bytes fetched before a lease; nil: uncounted.
	Prestaged content.Progress
	// Fetched counts input bytes fetched, by the kind of source
	// ("submitter" or "provider"); nil: uncounted.
	Fetched *prometheus.CounterVec
	// ThroughRelay counts the fetches from a submitter that went through
	// a relay carrying data, for want of a direct path; nil: uncounted.
	ThroughRelay prometheus.Counter
	// Panics counts the panics recovered in leases' goroutines
	// (e31_panics_total{where="lease"}); nil: uncounted.
	Panics prometheus.Counter
}

func (m *Metrics) prestaged() content.Progress {
	if m == nil {
		return nil
	}
	return m.Prestaged
}

// ErrWithdrawn is the cause given to a lease's context when its submitter
// withdraws the job.
var ErrWithdrawn = errors.New("withdrawn by the submitter")

// ErrReceiptsRefused is the cause given to a lease's context when its
// submitter refused, or left unanswered, maxRefusedReceipts receipts in a
// row: the provider stops working unpaid. The lease ends withdrawn, the
// submitter's doing.
var ErrReceiptsRefused = fmt.Errorf("%w: it refused or left unanswered %d receipts in a row", ErrWithdrawn, maxRefusedReceipts)

// ErrReleasedUnrun is the cause given to a lease's context when its
// submitter released it, tired of waiting for the run to start: the time
// is the provider's to bear (provider-lost, attribution provider).
var ErrReleasedUnrun = errors.New("released by the submitter before the run started")
