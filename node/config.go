package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/e31network/e31/exec"
	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/digest"
	"github.com/e31network/e31/node/hours"
	"github.com/e31network/e31/node/provider"
	"github.com/e31network/e31/node/reach"
	"github.com/e31network/e31/node/view"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// Config is what a node is started with. The zero value of every field but
// DataDir has a documented default, applied by withDefaults.
type Config struct {
	// DataDir holds the identity key, the stores and the API socket.
	DataDir string
	// Listen holds libp2p multiaddrs; default p2p.DefaultListen.
	Listen []string
	// Bootstrap holds multiaddrs (with /p2p/ID) of peers to stay connected to.
	Bootstrap []string
	// API is the local API address: a unix socket path or a loopback
	// host:port. Default DataDir/e31.sock.
	API string
	// UI, when set, is a loopback host:port serving the dashboard and the
	// API's reads only: for a daemon whose API is a unix socket. A TCP API
	// serves the dashboard itself.
	UI string
	// SimGPUs, when set, replaces GPU discovery with simulated GPUs
	// ("4xH100:80GiB").
	SimGPUs string
	// DiscoverGPUs finds the machine's real GPUs when SimGPUs is empty;
	// e31d passes nvidia.Discover. Nil means none: the node then offers no
	// compute. It is a field rather than a call so that programs that
	// embed a node without real GPUs (the test network) compile no NVML.
	DiscoverGPUs func(context.Context, *slog.Logger) []exec.GPU
	// Hours, when set, are the only times the node lends its GPUs
	// (e31d --hours; node/hours); nil: always.
	Hours *hours.Schedule
	// ReclaimOnUse watches the GPUs and drains the node quickly when its
	// owner starts using one, taking work again once they are left alone
	// for ReclaimIdle (default 10m; node/reclaim).
	ReclaimOnUse bool
	ReclaimIdle  time.Duration
	// OpenGPUUse reads who uses the real GPUs, for ReclaimOnUse; e31d
	// passes NVML's reader (exec/nvidia.OpenUse), and a node with
	// simulated GPUs reads DataDir/sim-gpu-use instead. Close it once the
	// watcher has stopped.
	OpenGPUUse func(context.Context, *slog.Logger) GPUUse
	// OnReady, if set, is called once Run serves the API and has written
	// RunFile: e31d tells systemd it is ready then.
	OnReady func(RunInfo)
	// Network names the E31 network; default "e31".
	Network string
	// Shards is how many shards the network's market is split into: a
	// power of two, the same on every peer of the network (p2p.Shard).
	// 0 or 1: one market, the whole network.
	Shards int
	// Shard, if set, is the shard this node takes part in; nil means the
	// one its peer ID picks (p2p.ShardOf).
	Shard *int
	// Market is how the network's market is split, the same on every
	// peer: "" by Shards (one market when 1), or MarketClasses, by
	// resource class, where a provider's shard is derived from its GPUs
	// (classShardOf) and Shards and Shard do not apply.
	Market string
	// ClassShards is how many subshards a class's market is split into,
	// by class name (a power of two, default 1), the same on every peer;
	// only with Market MarketClasses.
	ClassShards map[string]int
	// MDNS turns on LAN discovery. Off by default: it multicasts on every
	// interface.
	MDNS bool
	// NAT turns on what lets a node behind a NAT be reached: AutoNAT, port
	// mapping, hole punching, and relay slots on the bootstrap peers. NATAuto
	// (the default) means on unless every listen address is loopback.
	NAT string
	// RelayService makes this node a circuit relay for peers behind NATs,
	// at once (a bootstrap peer on a public address). Off by default.
	RelayService bool
	// RelayData lets the relay's circuits carry jobs' data between peers
	// no hole can be punched between (reach.Relay.Data); RelayPerDay
	// bounds the circuits one peer opens through it in a day (0: no
	// bound; e31d's default is DefaultRelayCircuitsPerDay).
	RelayData   bool
	RelayPerDay int
	// RelayBudgetPeer and RelayBudgetIP bound, in bytes, what the relay's
	// data circuits carry for one peer, and for every peer behind one
	// address (an IPv4 address, an IPv6 /64), in RelayBudgetWindow; a
	// circuit carries data only between the parties of a live lease (or
	// a gang's parts). 0: DefaultRelayBudgetPeer, DefaultRelayBudgetIP
	// and a day; negative: no bound.
	RelayBudgetPeer   int64
	RelayBudgetIP     int64
	RelayBudgetWindow time.Duration
	// PunchWait is how long a lease's data waits for a hole punch before
	// a relay that carries data carries it, unless the punch fails sooner;
	// 0: p2p.RelayDataWait (3s).
	PunchWait time.Duration
	// Heartbeat is how often a provider re-publishes its offer; a provider
	// silent for three heartbeats leaves every view. Default 10s.
	Heartbeat time.Duration
	// DigestEvery is how often the publisher of this node's shard
	// publishes its digest on the network's digest topic (node/digest);
	// default 60s.
	DigestEvery time.Duration
	// Prices are this node's prices per GPU-hour by GPU model (e31d
	// --price): its offer names the price of its GPUs (market.PriceList).
	// Currency names their unit, the same on every peer of a network;
	// default "credits".
	Prices   market.PriceList
	Currency string
	// MoveAfter is how long a job of this node waits in a class market
	// whose digest shows no room for it before it moves to one whose
	// digest shows room (submitter.Config.MoveAfter); default
	// market.MoveAfter.
	MoveAfter time.Duration
	// Epoch is the length of a matching epoch; default 1s.
	Epoch time.Duration
	// EpochDelay is how long before an epoch's start a message must have
	// been signed to be in that epoch's view: more than gossip's p99, so
	// that every peer matches on the same facts. Zero (the default) adapts
	// it every epoch to the gossip delays the providers announce (see
	// market/doc.go, "The epoch's view"); a value set stays fixed. Every
	// peer of a network must use the same setting, as the same Epoch.
	EpochDelay time.Duration
	// NoFastPath turns off straight-to-rent (market/doc.go): the node, as a
	// provider, then proposes only what an epoch's Match assigns it.
	NoFastPath bool
	// ProposalTTL is how long a lease proposal waits for the submitter's
	// answer; default 10s.
	ProposalTTL time.Duration
	// ReceiptInterval is how often the provider signs an interim receipt
	// while compute is held; default 60s.
	ReceiptInterval time.Duration
	// Grace is the time between SIGTERM and SIGKILL when a job reaches its
	// limit or is withdrawn; default 30s.
	Grace time.Duration
	// GangStartWithin bounds how long a staged gang part waits for its
	// gang lease before it ends withdrawn, the submitter's doing; default
	// provider.DefaultGangStartWithin.
	GangStartWithin time.Duration
	// OutputTimeout bounds handing the output to the submitter; default 10m.
	OutputTimeout time.Duration
	// Retention is how long a provider keeps a released lease's output,
	// checkpoints and inputs pinned (then releases them and collects their
	// blocks; the ledger keeps their CIDs), and how long it keeps retrying
	// to hand output to a submitter that is away; default 7 days.
	Retention time.Duration
	// ProviderLostAfter is how long a submitter waits, hearing nothing from
	// a provider holding its job (no offer heartbeat, no message), before it
	// ends the lease as provider-lost; default 30s.
	ProviderLostAfter time.Duration
	// StallTimeout fails a transfer when no block arrives for this long;
	// default 60s.
	StallTimeout time.Duration
	// MaxInputBytes caps the data a job may declare; default 64 GiB.
	MaxInputBytes int64
	// MaxOutputBytes caps an output or checkpoint this node fetches as a
	// submitter, and what one e31 get writes out; default 1 TiB.
	MaxOutputBytes int64
	// MaxEntries caps the files, folders and links of one image layer,
	// input, output or checkpoint this node unpacks, lays out, imports or
	// writes out; default 1,000,000. MaxDepth caps their folder nesting;
	// default 256. Content from peers may be hostile: these bound the time,
	// memory and disk one job's content can cost.
	MaxEntries int
	MaxDepth   int
	// MaxLayerBytes caps what one image layer unpacks to; default 64 GiB.
	MaxLayerBytes int64
	// CPUs and MemoryBytes are what the node offers besides its GPUs;
	// default the machine's.
	CPUs        int
	MemoryBytes uint64
	// ImageCacheBytes caps the unpacked image layers kept under
	// DataDir/layers; default 64 GiB.
	ImageCacheBytes int64
	// ImagePull lets the provider pull a job's image from its registry
	// (work.image_ref) rather than fetch it from the submitter.
	ImagePull bool
	// RequireImage makes the provider take only jobs that bring their
	// own image; its offer says so.
	RequireImage bool
	// MaxJobDisk caps request.disk for jobs run here; the offer says so.
	// 0: a quarter of the data dir's filesystem (diskroom.DefaultMaxJobDisk).
	MaxJobDisk uint64
	// DiskReserve is the free space of the data dir's filesystem that no
	// job's disk, input, output or checkpoint may take: the node's own
	// records write into it, and the machine's owner keeps it. 0: a tenth
	// of the filesystem and at least 20 GiB, at most a quarter of it
	// (diskroom.DefaultReserve); on a node that runs no jobs, a GiB or a
	// hundredth of it (diskroom.RecordsReserve).
	DiskReserve uint64
	// UnboundedDisk lends disk to jobs where a job's disk cannot be
	// bounded (no loop devices or mkfs.ext4): they then write on the data
	// dir's filesystem, bounded by nothing. Off, such a node takes no job.
	UnboundedDisk bool
	// NoCPUJobs takes only jobs that ask for GPUs; the offer says so.
	NoCPUJobs bool
	// DebugDiskFree, when set, is counted as the data dir's filesystem's
	// size and free space, whatever it holds: how a test network whose
	// nodes share one filesystem grants its jobs' disks alike on every
	// machine. Never set on a real node.
	DebugDiskFree uint64
	// View bounds the jobs and declaration bytes this node's view of the
	// jobs topic holds, all submitters together (node/view, "Bounds");
	// zero fields take view's defaults, negative ones lift the bound.
	// Self is set by the node.
	View view.Bounds
	// NoLocality and LocalityWait are what jobs submitted here declare
	// when they say nothing of locality: request.locality off, or
	// request.locality_wait (at most market.MaxLocalityWait). They are
	// written into the signed declaration, so peers never disagree on a
	// job's rule (market/doc.go, "Data gravity").
	NoLocality   bool
	LocalityWait time.Duration
	// AvoidFor is how long a job submitted here first avoids a provider
	// that failed it (submitter.Config.AvoidFor); 0: the default.
	AvoidFor time.Duration
	// Runtime is the OCI runtime binary; default runc, else crun.
	Runtime string
	// UploadLimit caps, in bytes per second, what the node serves to
	// peers over the bulk protocol, all together; 0: no limit.
	UploadLimit int64
	// SingleSource makes the provider stage inputs from the submitter
	// alone; by default it also fetches from the other providers that
	// hold them for the same submitter.
	SingleSource bool
	// NoPrestage makes the provider wait for the lease to fetch a job's
	// inputs; by default it starts when Match reserves it for the job.
	NoPrestage bool
	// Metrics is the address of the Prometheus endpoint; off when empty.
	Metrics string
	// ShutdownTimeout bounds how long a stopping node waits for its leases
	// to finish what they were doing (stopping a run, importing an output)
	// before it abandons them; default Grace plus 15s.
	ShutdownTimeout time.Duration
	// StopDrain is how long a stopping node lets its running jobs go on
	// before it drains them quickly (each gets its grace to checkpoint,
	// ends preempted and goes on elsewhere); 0, the default, drains them
	// quickly at once; negative stops them with the node, lost.
	StopDrain time.Duration
	// EventTimeout bounds telling a submitter of a step or a checkpoint;
	// ReceiptTimeout bounds one receipt exchange; ConnectTimeout bounds
	// dialling a peer. Defaults 10s, 15s and 10s.
	EventTimeout   time.Duration
	ReceiptTimeout time.Duration
	ConnectTimeout time.Duration
	// DebugPartition serves POST /v1/debug/block, which cuts the node off
	// from peers: how tests split a network on one machine. Off by default.
	DebugPartition bool
	// RawContent makes this node a hostile submitter, for tests: it serves
	// POST /v1/debug/car, which stores a CAR's blocks as they are (each
	// must hash to its CID, nothing else is checked) and pins its roots,
	// complete or not; and its submitter takes a work.image CID, or an
	// input or checkpoint, that such a CAR brought, without checking that
	// it is an image or a whole DAG. How tests put arbitrary DAGs on the
	// network (node/rawcontent). Set only by the byzantine build (e31d
	// --misbehave raw-content); a default build has not the code, and New
	// refuses it.
	RawContent bool
	// Doctor, when set, runs e31d doctor's checks of this machine with the
	// daemon's own configuration, for GET /v1/doctor (e31 doctor).
	Doctor func(ctx context.Context) api.DoctorReport
	// Misbehave makes the provider break the protocol on purpose, to test
	// the defences against providers that do (cmd/e31d built with the
	// byzantine tag). Nil, as in every default daemon: it behaves.
	Misbehave provider.Misbehaviour
	// Log receives the node's structured logs; default discards.
	Log *slog.Logger

	// Set by this package's own tests only.
	testRunner provider.Runner // replaces the OCI runtime
	// testSeeGPUs replaces the check of the GPUs before a run.
	testSeeGPUs func(context.Context) []exec.GPU
	// testLoseReply, when it returns true, answers a direct-stream request
	// with an error after its handler has run: the reply was lost.
	testLoseReply func(proto protocol.ID, from peer.ID) bool
}

// NAT modes (Config.NAT), as node/reach takes them.
const (
	NATAuto = reach.NATAuto // on unless every listen address is loopback
	NATOn   = reach.NATOn
	NATOff  = reach.NATOff
)

// Defaults of Config.MaxEntries and Config.MaxDepth.
const (
	DefaultMaxEntries = 1_000_000
	DefaultMaxDepth   = 256
)

// DefaultNetwork is the network joined when none is named.
const DefaultNetwork = "e31"

// DefaultRelayCircuitsPerDay is e31d's bound on the circuits one peer
// opens through its relay in a day: a lease takes a handful (its
// messages, its staging, its output), so a thousand is a busy peer's day
// and bounds what one peer can make a relay that carries data carry.
const DefaultRelayCircuitsPerDay = 1000

// DefaultRelayBudgetPeer and DefaultRelayBudgetIP are what a relay that
// carries data carries for one peer, and for one address, in a day: a few
// jobs' data sets and outputs through a router no hole gets through, and
// a small lab behind one address; a relay's uplink, at the 33 MiB/s a
// relay carried in nat-bench, moves about 2.7 TiB a day.
const (
	DefaultRelayBudgetPeer int64 = 32 << 30
	DefaultRelayBudgetIP   int64 = 128 << 30
)

// DefaultHeartbeat is how often a provider re-publishes its offer when
// Config.Heartbeat is not set.
const DefaultHeartbeat = 10 * time.Second

func (c Config) withDefaults() (Config, error) {
	if c.DataDir == "" {
		return c, errors.New("no data dir")
	}
	if c.RawContent && !rawContentBuilt {
		return c, errors.New("raw content needs a build with the byzantine tag")
	}
	abs, err := filepath.Abs(c.DataDir)
	if err != nil {
		return c, fmt.Errorf("data dir: %w", err)
	}
	c.DataDir = abs
	if c.API == "" {
		c.API = filepath.Join(c.DataDir, "e31.sock")
	}
	if c.Network == "" {
		c.Network = DefaultNetwork
	}
	if c.Shards == 0 {
		c.Shards = 1
	}
	if err := (p2p.Shard{Count: c.Shards}).Valid(); err != nil {
		return c, err
	}
	if c.Shard != nil {
		if err := (p2p.Shard{Index: *c.Shard, Count: c.Shards}).Valid(); err != nil {
			return c, err
		}
	}
	if err := c.checkMarket(); err != nil {
		return c, err
	}
	if c.Heartbeat == 0 {
		c.Heartbeat = DefaultHeartbeat
	}
	if c.Heartbeat < 50*time.Millisecond {
		return c, fmt.Errorf("heartbeat %s is too short (minimum 50ms)", c.Heartbeat)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.Epoch, time.Second)
	def(&c.DigestEvery, digest.DefaultEvery)
	if c.Currency == "" {
		c.Currency = DefaultCurrency
	}
	def(&c.ProposalTTL, 10*time.Second)
	def(&c.ReceiptInterval, 60*time.Second)
	def(&c.Grace, 30*time.Second)
	def(&c.OutputTimeout, 10*time.Minute)
	def(&c.StallTimeout, 60*time.Second)
	def(&c.Retention, 7*24*time.Hour)
	def(&c.ProviderLostAfter, 30*time.Second)
	def(&c.ShutdownTimeout, c.Grace+15*time.Second)
	def(&c.EventTimeout, 10*time.Second)
	def(&c.ReceiptTimeout, 15*time.Second)
	def(&c.ConnectTimeout, 10*time.Second)
	if c.Grace > ledger.MaxGrace {
		// A lease's held time allows this much grace and no more: a
		// receipt for a longer one would not be countersigned.
		return c, fmt.Errorf("grace %s is longer than a lease allows (%s)", c.Grace, ledger.MaxGrace)
	}
	if c.ProposalTTL >= view.LeaseOfferMargin {
		// Every peer ends a lease whose GPUs an offer signed this long after
		// the proposal shows free; a proposal still waiting then would be
		// ended before it is answered.
		return c, fmt.Errorf("proposal TTL %s must be shorter than %s", c.ProposalTTL, view.LeaseOfferMargin)
	}
	if c.CPUs == 0 {
		c.CPUs = hostCPUs()
	}
	if c.MemoryBytes == 0 {
		c.MemoryBytes = hostMemory()
	}
	if c.MaxOutputBytes == 0 {
		c.MaxOutputBytes = 1 << 40
	}
	if c.MaxEntries == 0 {
		c.MaxEntries = DefaultMaxEntries
	}
	if c.MaxDepth == 0 {
		c.MaxDepth = DefaultMaxDepth
	}
	if c.MaxLayerBytes == 0 {
		c.MaxLayerBytes = 64 << 30
	}
	if c.MaxEntries < 0 || c.MaxDepth < 0 || c.MaxLayerBytes < 0 || c.MaxOutputBytes < 0 {
		return c, errors.New("the caps on entries, depth, layer and output size must not be negative")
	}
	if c.ImageCacheBytes == 0 {
		c.ImageCacheBytes = 64 << 30
	}
	if c.LocalityWait < 0 || c.LocalityWait.Milliseconds() > int64(market.MaxLocalityWait) {
		return c, fmt.Errorf("locality wait %s: want at most %s", c.LocalityWait, market.Duration(market.MaxLocalityWait))
	}
	if c.RelayData && !c.RelayService {
		return c, errors.New("--relay-data needs --relay-service")
	}
	if c.RelayPerDay < 0 {
		return c, fmt.Errorf("relay circuits per day %d is negative", c.RelayPerDay)
	}
	if c.AvoidFor < 0 || c.AvoidFor > wire.MaxAvoidFor {
		return c, fmt.Errorf("avoid-for %s: want at most %s", c.AvoidFor, wire.MaxAvoidFor)
	}
	if c.NoLocality && c.LocalityWait != 0 {
		return c, errors.New("a locality wait needs locality on")
	}
	if c.ImageCacheBytes < 0 {
		return c, fmt.Errorf("image cache size %d is negative", c.ImageCacheBytes)
	}
	if c.MaxInputBytes == 0 {
		c.MaxInputBytes = 64 << 30
	}
	if c.GangStartWithin < 0 {
		return c, fmt.Errorf("gang start wait %s is negative", c.GangStartWithin)
	}
	if c.EpochDelay < 0 {
		return c, fmt.Errorf("epoch delay %s is negative", c.EpochDelay)
	}
	if c.Epoch < 50*time.Millisecond || c.EpochDelay >= c.Epoch {
		return c, fmt.Errorf("epoch %s must be at least 50ms and longer than the epoch delay %s", c.Epoch, c.EpochDelay)
	}
	if c.Epoch > view.MaxEpoch {
		return c, fmt.Errorf("epoch %s is longer than the longest the view supports, %s", c.Epoch, view.MaxEpoch)
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// DefaultCurrency is the unit of prices on a network that names none.
const DefaultCurrency = "credits"
