// Command e31d is the E31 daemon: every peer of the network runs one. It
// offers this machine's GPUs, runs leased jobs in a sandbox, and serves the
// local API that the e31 command uses.
package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/e31network/e31/cmd/e31/manpage"
	"github.com/e31network/e31/cmd/e31d/doctor"
	"github.com/e31network/e31/exec"
	"github.com/e31network/e31/exec/nvidia"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/digest"
	"github.com/e31network/e31/node/hours"
	"github.com/e31network/e31/node/provider"
	"github.com/e31network/e31/node/view"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// fileConfig is the TOML config file; every key mirrors a flag, and a flag
// given on the command line wins over the file.
type fileConfig struct {
	Data         string   `toml:"data"`
	Listen       []string `toml:"listen"`
	Bootstrap    []string `toml:"bootstrap"`
	API          string   `toml:"api"`
	UI           string   `toml:"ui"`
	SimGPUs      string   `toml:"sim-gpus"`
	Network      string   `toml:"network"`
	Shards       int      `toml:"shards"`
	Shard        string   `toml:"shard"`
	Market       string   `toml:"market"`
	ClassShards  string   `toml:"class-shards"`
	Price        string   `toml:"price"`
	Currency     string   `toml:"currency"`
	MDNS         bool     `toml:"mdns"`
	NAT          string   `toml:"nat"`
	RelayService bool     `toml:"relay-service"`
	RelayData    bool     `toml:"relay-data"`
	RelayPerDay  int      `toml:"relay-circuits-per-day"`
	NoFastPath   bool     `toml:"no-fast-path"`
	NATPublicNet []string `toml:"nat-public-net"`
	Heartbeat    string   `toml:"heartbeat"`
	LogLevel     string   `toml:"log-level"`
	LogFormat    string   `toml:"log-format"`
	Metrics      string   `toml:"metrics"`
	CPUs         int      `toml:"cpus"`
	Memory       string   `toml:"memory"`
	MaxInput     string   `toml:"max-input"`
	MaxOutput    string   `toml:"max-output"`
	MaxEntries   int      `toml:"max-entries"`
	MaxDepth     int      `toml:"max-depth"`
	MaxLayer     string   `toml:"max-layer"`
	Runtime      string   `toml:"runtime"`
	// The relay's byte budgets for data circuits, per peer and per address.
	RelayBudgetPeer string `toml:"relay-budget-peer"`
	RelayBudgetIP   string `toml:"relay-budget-ip"`
	RelayBudgetWin  string `toml:"relay-budget-window"`
	// Images.
	ImageCacheSize string `toml:"image-cache-size"`
	ImagePull      bool   `toml:"image-pull"`
	RequireImage   bool   `toml:"require-image"`
	MaxJobDisk     string `toml:"max-job-disk"`
	// The data dir's disk, lent to jobs.
	DiskReserve   string `toml:"disk-reserve"`
	UnboundedDisk bool   `toml:"unbounded-disk"`
	CPUJobs       *bool  `toml:"cpu-jobs"`
	// The view of the jobs topic, all submitters together.
	ViewJobs  int    `toml:"view-jobs"`
	ViewBytes string `toml:"view-bytes"`
	// Locality defaults of jobs submitted here.
	NoLocality bool `toml:"no-locality"`
	// Data movement.
	UploadLimit  string `toml:"upload-limit"`
	SingleSource bool   `toml:"single-source"`
	NoPrestage   bool   `toml:"no-prestage"`
	// The contributor's machine.
	Hours        string `toml:"hours"`
	ReclaimOnUse bool   `toml:"reclaim-on-use"`
	// Durations, as Go durations ("30s").
	Epoch           string `toml:"epoch"`
	EpochDelay      string `toml:"epoch-delay"`
	DigestEvery     string `toml:"digest-every"`
	MoveAfter       string `toml:"move-after"`
	ReceiptInterval string `toml:"receipt-interval"`
	Grace           string `toml:"grace"`
	GangStartWithin string `toml:"gang-start-within"`
	OutputTimeout   string `toml:"output-timeout"`
	ProposalTTL     string `toml:"proposal-ttl"`
	StallTimeout    string `toml:"stall-timeout"`
	Retention       string `toml:"retention"`
	ProviderLost    string `toml:"provider-lost-after"`
	LocalityWait    string `toml:"locality-wait"`
	AvoidFor        string `toml:"avoid-for"`
	StopDrain       string `toml:"stop-drain"`
	ReclaimIdle     string `toml:"reclaim-idle"`
	PunchWait       string `toml:"punch-wait"`
}

// misbehaviour is what --misbehave asks for: the zero value, an honest
// daemon, in every default build (misbehave_default.go).
type misbehaviour struct {
	provider   provider.Misbehaviour // nil: the provider behaves
	rawContent bool                  // node.Config.RawContent
}

type options struct {
	config string
	// debugPartition serves the partition switch tests use; hidden.
	debugPartition bool
	file           fileConfig
	// debugDiskFree counts this as the data dir's free space; hidden.
	debugDiskFree string
	// cpuJobs is --cpu-jobs, or the file's where the flag is not given.
	cpuJobs bool
	// misbehave reads --misbehave, which only a byzantine build has.
	misbehave func() (misbehaviour, error)
	// Durations parsed from flags, or from the file where no flag was given.
	heartbeat, epoch, epochDelay, digestEvery, moveAfter, receiptInterval, grace, gangStartWithin, outputTimeout, proposalTTL, stallTimeout, retention, providerLost time.Duration

	// localityWait is --locality-wait and avoidFor --avoid-for, parsed
	// like the durations above.
	localityWait, avoidFor, stopDrain, reclaimIdle, punchWait time.Duration
	// relayBudgetWindow is --relay-budget-window, likewise.
	relayBudgetWindow time.Duration
}

// durationFlags ties each duration flag to its option and config key.
func (o *options) durationFlags(fc *fileConfig) []struct {
	name string
	dst  *time.Duration
	file string
} {
	return []struct {
		name string
		dst  *time.Duration
		file string
	}{
		{"heartbeat", &o.heartbeat, fc.Heartbeat},
		{"epoch", &o.epoch, fc.Epoch},
		{"epoch-delay", &o.epochDelay, fc.EpochDelay},
		{"digest-every", &o.digestEvery, fc.DigestEvery},
		{"move-after", &o.moveAfter, fc.MoveAfter},
		{"receipt-interval", &o.receiptInterval, fc.ReceiptInterval},
		{"grace", &o.grace, fc.Grace},
		{"gang-start-within", &o.gangStartWithin, fc.GangStartWithin},
		{"output-timeout", &o.outputTimeout, fc.OutputTimeout},
		{"proposal-ttl", &o.proposalTTL, fc.ProposalTTL},
		{"stall-timeout", &o.stallTimeout, fc.StallTimeout},
		{"retention", &o.retention, fc.Retention},
		{"provider-lost-after", &o.providerLost, fc.ProviderLost},
		{"locality-wait", &o.localityWait, fc.LocalityWait},
		{"avoid-for", &o.avoidFor, fc.AvoidFor},
		{"stop-drain", &o.stopDrain, fc.StopDrain},
		{"reclaim-idle", &o.reclaimIdle, fc.ReclaimIdle},
		{"punch-wait", &o.punchWait, fc.PunchWait},
		{"relay-budget-window", &o.relayBudgetWindow, fc.RelayBudgetWin},
	}
}

func defaultDataDir() string {
	if d := os.Getenv("E31_DATA"); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ".e31"
	}
	return filepath.Join(home, ".e31")
}

func newCommand() *cobra.Command {
	var o options
	cmd := &cobra.Command{
		Use:   "e31d",
		Short: "The E31 daemon: offer GPUs, run leased jobs, serve the local API",
		Long: `e31d joins an E31 network, offers this machine's GPUs (found with NVML, or
simulated with --sim-gpus), runs leased jobs in an OCI sandbox, and serves the
local API that the e31 command talks to (a unix socket in the data dir unless
--api names a loopback address).

A config file (TOML, --config) may set any flag by its long name; flags given
on the command line win.`,
		Example: `  e31d --data ~/.e31 --listen /ip4/0.0.0.0/tcp/4031
  e31d --data /tmp/n1 --listen /ip4/127.0.0.1/tcp/0 --sim-gpus 4xH100:80GiB \
       --bootstrap /ip4/127.0.0.1/tcp/4031/p2p/12D3KooW...`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return run(cmd, &o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.config, "config", "", "TOML config file (flags win over it)")
	f.StringVar(&o.file.Data, "data", defaultDataDir(), "data dir: identity key, stores, API socket (env E31_DATA)")
	f.StringArrayVar(&o.file.Listen, "listen", nil, "libp2p multiaddr to listen on, repeatable (default: a free TCP and QUIC port on all interfaces)")
	f.StringArrayVar(&o.file.Bootstrap, "bootstrap", nil, "multiaddr of a peer to stay connected to, ending in /p2p/<peer ID>; repeatable")
	f.StringVar(&o.file.API, "api", "", "local API address: a unix socket path or a loopback host:port, which asks every request for the token in DATA/api-token (default DATA/e31.sock)")
	f.StringVar(&o.file.UI, "ui", "", "loopback host:port serving the dashboard (read-only; opened with e31 ui's one-time link, or the token) for a daemon whose --api is a unix socket; a TCP --api serves it at /ui/")
	f.StringVar(&o.file.SimGPUs, "sim-gpus", "", `simulated GPUs instead of real ones, e.g. "4xH100:80GiB" or "2xA100:40GiB,1xL4:24GiB"`)
	f.StringVar(&o.file.Network, "network", node.DefaultNetwork, "network name; peers on other networks are ignored")
	f.IntVar(&o.file.Shards, "shards", 1, "how many shards the network's market is split into: a power of two, the same on every peer of the network; a peer hears and matches only its own shard's offers and jobs")
	f.StringVar(&o.file.Shard, "shard", "", "take part in this shard, 0 to shards-1 (default: the one the peer ID picks)")
	f.StringVar(&o.file.Market, "market", "", "how the network's market is split, the same on every peer: \"classes\" by resource class (a provider offers in the market of its GPUs' class, e.g. H100x1-4, consumer-24G, cpu; --shards and --shard do not apply); default: one market, or --shards")
	f.StringVar(&o.file.Price, "price", "", "what an hour of one of this node's GPUs costs, by model, in --currency: MODEL=PRICE,..., e.g. H100=2.40,default=1.00 (a box is priced at its dearest GPU; default: free). Its offer names the price; a job whose request.max_price is under it is not placed here")
	f.StringVar(&o.file.Currency, "currency", node.DefaultCurrency, "the unit of --price, the same on every peer of a network")
	f.StringVar(&o.file.ClassShards, "class-shards", "", "with --market classes, how many subshards a class's market is split into, a power of two, the same on every peer: CLASS=N,..., e.g. H100x1-4=4,consumer-24G=16 (default 1 each)")
	f.BoolVar(&o.file.MDNS, "mdns", false, "discover peers on the LAN with mDNS (multicasts on every interface)")
	f.StringVar(&o.file.NAT, "nat", node.NATAuto, "reach and be reached from behind a NAT: AutoNAT, port mapping, hole punching, relay slots on the bootstrap peers; auto (on unless every --listen is loopback), on or off")
	f.BoolVar(&o.file.RelayService, "relay-service", false, "serve as a circuit relay for peers behind NATs (for a bootstrap peer on a public address)")
	f.DurationVar(&o.punchWait, "punch-wait", 0, "how long a lease's data waits for a hole punch before a relay that carries data carries it, unless the punch fails sooner (default 3s)")
	f.BoolVar(&o.file.RelayData, "relay-data", false, "with --relay-service, let circuits carry jobs' data (staging, outputs, checkpoints) between a live lease's parties no hole can be punched between, with no limit on a circuit's bytes or time but the byte budgets; off, a circuit carries a lease's messages only")
	f.IntVar(&o.file.RelayPerDay, "relay-circuits-per-day", node.DefaultRelayCircuitsPerDay, "with --relay-service, the most circuits one peer may open through this relay in any 24 hours; 0: no bound")
	f.StringVar(&o.file.RelayBudgetPeer, "relay-budget-peer", market.Size(node.DefaultRelayBudgetPeer).String(), "with --relay-data, the most bytes this relay carries on one peer's data circuits in --relay-budget-window; 0: no bound")
	f.StringVar(&o.file.RelayBudgetIP, "relay-budget-ip", market.Size(node.DefaultRelayBudgetIP).String(), "with --relay-data, the most bytes this relay carries on the data circuits of every peer behind one address (an IPv4 address, an IPv6 /64) in --relay-budget-window; 0: no bound")
	f.DurationVar(&o.relayBudgetWindow, "relay-budget-window", 24*time.Hour, "the window a relay's byte budgets are spent over")
	f.BoolVar(&o.file.NoFastPath, "no-fast-path", false, "as a provider, lease only what an epoch's Match assigns, never straight away between epochs")
	f.StringArrayVar(&o.file.NATPublicNet, "nat-public-net", nil, "private IPv4 network that counts as public for NAT traversal (the network between sites of a private WAN, or a test bed), e.g. 10.31.0.0/24; repeatable")
	f.DurationVar(&o.heartbeat, "heartbeat", node.DefaultHeartbeat, "how often the offer is re-published; 3 missed heartbeats drop a provider")
	f.DurationVar(&o.epoch, "epoch", time.Second, "length of a matching epoch, from 50ms to 1m")
	f.DurationVar(&o.epochDelay, "epoch-delay", 0, "how long before an epoch's start a message must have been signed to count in its view; 0 (default) adapts it to the gossip delays providers announce, at most half the epoch; every peer of a network must use the same setting")
	f.DurationVar(&o.moveAfter, "move-after", time.Duration(market.MoveAfter)*time.Millisecond, "with --market classes: how long a job of this node waits in a class market whose digest shows no room for it before it moves to one whose digest shows room")
	f.DurationVar(&o.digestEvery, "digest-every", digest.DefaultEvery, "how often the publisher of this node's shard publishes the shard's digest on the network's digest topic (e31 market); every peer of a network must use the same setting")
	f.DurationVar(&o.receiptInterval, "receipt-interval", time.Minute, "how often an interim receipt is signed while compute is held")
	f.DurationVar(&o.grace, "grace", 30*time.Second, "time between SIGTERM and SIGKILL at a job's limit or withdrawal (cut short once no process of the job handles SIGTERM)")
	f.DurationVar(&o.gangStartWithin, "gang-start-within", provider.DefaultGangStartWithin, "how long a staged part of a gang waits for the gang lease its submitter signs; past it the part ends withdrawn, the submitter's doing, and a submitter that lets it lapse twice in a row is struck off")
	f.DurationVar(&o.outputTimeout, "output-timeout", 10*time.Minute, "how long output waits to be handed to the submitter")
	f.DurationVar(&o.proposalTTL, "proposal-ttl", 10*time.Second, "how long a lease proposal waits for an answer")
	f.DurationVar(&o.stallTimeout, "stall-timeout", time.Minute, "a transfer with no block for this long fails")
	f.DurationVar(&o.retention, "retention", 7*24*time.Hour, "how long a provider keeps a released lease's output, checkpoints and inputs, and how long output waits for a submitter that is away")
	f.DurationVar(&o.providerLost, "provider-lost-after", 30*time.Second, "a provider silent this long loses its lease (outcome provider-lost)")
	f.IntVar(&o.file.CPUs, "cpus", 0, "CPUs to offer beside the GPUs (default: all of this machine's)")
	f.StringVar(&o.file.Memory, "memory", "", "memory to offer beside the GPUs, e.g. 64GiB (default: all of this machine's)")
	f.StringVar(&o.file.MaxInput, "max-input", "64GiB", "largest total of input data a job submitted here may declare, and largest input one lease here may fetch")
	f.StringVar(&o.file.MaxOutput, "max-output", "1TiB", "largest output or checkpoint of a job submitted here that this node fetches, or one e31 get writes out")
	f.IntVar(&o.file.MaxEntries, "max-entries", node.DefaultMaxEntries, "most files, folders and links in one image layer, input, output or checkpoint this node unpacks, lays out, imports or writes out")
	f.IntVar(&o.file.MaxDepth, "max-depth", node.DefaultMaxDepth, "deepest folder nesting of one input, output or checkpoint this node lays out, imports or writes out")
	f.StringVar(&o.file.MaxLayer, "max-layer", "64GiB", "most bytes one image layer of a job run here may unpack to")
	f.StringVar(&o.file.Metrics, "metrics", "", "serve Prometheus metrics on this address, and Go profiles under /debug/pprof/ where it is a loopback one (e.g. 127.0.0.1:9031); off when empty")
	f.StringVar(&o.file.Runtime, "runtime", "", "OCI runtime binary (default: runc, else crun, whichever works)")
	f.StringVar(&o.file.ImageCacheSize, "image-cache-size", "64GiB", "disk kept for unpacked image layers under DATA/layers (least recently used go first)")
	f.BoolVar(&o.file.ImagePull, "image-pull", false, "pull a job's image from its registry (work.image_ref) instead of fetching it from the submitter")
	f.BoolVar(&o.file.RequireImage, "require-image", false, "take only jobs that bring their own image (the offer says so)")
	f.StringVar(&o.file.MaxJobDisk, "max-job-disk", "", "largest request.disk a job run here may declare, e.g. 100GiB (the offer says so; default: a quarter of the data dir's filesystem)")
	f.StringVar(&o.file.DiskReserve, "disk-reserve", "", "free space of the data dir's filesystem no job's disk, input or output may take, kept for this node's own records and the machine's owner; under it the node takes no job (default: a tenth of the filesystem and at least 20GiB, at most a quarter of it)")
	f.BoolVar(&o.file.UnboundedDisk, "unbounded-disk", false, "take jobs where a job's disk cannot be bounded (no loop devices or mkfs.ext4): they then write on the data dir's filesystem, bounded by nothing (default: such a node takes no job)")
	f.BoolVar(&o.cpuJobs, "cpu-jobs", true, "take jobs that ask for no GPU (request.gpus 0): they hold CPUs, memory and disk, metered as CPU-hours; false leaves the CPUs and memory to the GPUs' jobs (the offer says so)")
	f.IntVar(&o.file.ViewJobs, "view-jobs", view.DefaultJobs, "the most jobs (array tasks and gang parts each one) this node's view of the network's queue holds, all submitters together; past it the newest and largest holders over their share are evicted; 0: no bound")
	f.StringVar(&o.file.ViewBytes, "view-bytes", market.Size(view.DefaultDeclarationBytes).String(), "the most bytes of job declarations this node's view holds, all submitters together, likewise; 0: no bound")
	f.BoolVar(&o.file.NoLocality, "no-locality", false, "jobs submitted here that say nothing of locality declare request.locality: off (placed by best fit, ignoring which provider holds their data)")
	f.DurationVar(&o.localityWait, "locality-wait", 0, "jobs submitted here that say nothing of locality declare this request.locality_wait: how long they may wait for a provider holding their data (at most 5m)")
	f.DurationVar(&o.avoidFor, "avoid-for", 0, "how long a job submitted here first avoids a provider that failed it; each later avoid of the same provider lasts twice as long, up to 24h (default 5m)")
	f.DurationVar(&o.stopDrain, "stop-drain", 0, "on SIGTERM, let running jobs go on this long, then stop each with its grace to write a last checkpoint: the lease ends preempted and the job goes on elsewhere (0: at once; negative: stop them with the daemon, lost)")
	f.StringVar(&o.file.UploadLimit, "upload-limit", "", "cap on what this node serves to peers over the bulk protocol, all together, e.g. 100MiB/s (default unlimited)")
	f.BoolVar(&o.file.SingleSource, "single-source", false, "as a provider, stage inputs from the submitter alone, not also from other providers that hold them")
	f.StringVar(&o.file.Hours, "hours", "", `lend the GPUs only at these times, in this machine's time zone: "Mon-Fri 19:00-07:30; Sat,Sun 00:00-24:00" (a window ending before it starts runs past midnight); the offer says when the window closes, only jobs whose limit ends by then are placed here, and what still runs at its end is drained quickly`)
	f.BoolVar(&o.file.ReclaimOnUse, "reclaim-on-use", false, "watch the GPUs and drain quickly when their owner starts using one (a process that is not a job's, or an idle GPU kept busy); take work again once they are left alone for --reclaim-idle")
	f.DurationVar(&o.reclaimIdle, "reclaim-idle", 0, "with --reclaim-on-use, how long the GPUs must be left alone before the node takes work again (default 10m)")
	f.BoolVar(&o.file.NoPrestage, "no-prestage", false, "as a provider, do not start fetching a job's inputs when Match reserves this node for it, only once leased")
	f.StringVar(&o.file.LogLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&o.file.LogFormat, "log-format", "text", "text or json")
	f.BoolVar(&o.debugPartition, "debug-partition", false, "serve POST /v1/debug/block on the API, which cuts this node off from peers (for tests)")
	_ = f.MarkHidden("debug-partition")
	f.StringVar(&o.debugDiskFree, "debug-disk-free", "", "count this as the data dir's filesystem's size and free space, whatever it holds (for tests)")
	_ = f.MarkHidden("debug-disk-free")
	o.misbehave = misbehaveFlag(f)
	cmd.AddCommand(newDoctorCommand(), newGPUProbeCommand(), manpage.Command(cmd))
	return cmd
}

// applyFile fills every flag not given on the command line from the config
// file.
func applyFile(flags *pflag.FlagSet, path string, o *options) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read config: %w", err)
	}
	fc, err := decodeConfig(path, data)
	if err != nil {
		return err
	}
	set := func(name string, apply func()) {
		if !flags.Changed(name) {
			apply()
		}
	}
	set("data", func() {
		if fc.Data != "" {
			o.file.Data = fc.Data
		}
	})
	set("listen", func() { o.file.Listen = append(o.file.Listen, fc.Listen...) })
	set("bootstrap", func() { o.file.Bootstrap = append(o.file.Bootstrap, fc.Bootstrap...) })
	set("api", func() { o.file.API = or(fc.API, o.file.API) })
	set("ui", func() { o.file.UI = or(fc.UI, o.file.UI) })
	set("sim-gpus", func() { o.file.SimGPUs = or(fc.SimGPUs, o.file.SimGPUs) })
	set("network", func() { o.file.Network = or(fc.Network, o.file.Network) })
	set("shards", func() { o.file.Shards = cmp.Or(fc.Shards, o.file.Shards) })
	set("shard", func() { o.file.Shard = or(fc.Shard, o.file.Shard) })
	set("market", func() { o.file.Market = or(fc.Market, o.file.Market) })
	set("class-shards", func() { o.file.ClassShards = or(fc.ClassShards, o.file.ClassShards) })
	set("price", func() { o.file.Price = or(fc.Price, o.file.Price) })
	set("currency", func() { o.file.Currency = or(fc.Currency, o.file.Currency) })
	set("mdns", func() { o.file.MDNS = o.file.MDNS || fc.MDNS })
	set("nat", func() { o.file.NAT = or(fc.NAT, o.file.NAT) })
	set("relay-service", func() { o.file.RelayService = o.file.RelayService || fc.RelayService })
	set("relay-data", func() { o.file.RelayData = o.file.RelayData || fc.RelayData })
	set("relay-circuits-per-day", func() { o.file.RelayPerDay = cmp.Or(fc.RelayPerDay, o.file.RelayPerDay) })
	set("relay-budget-peer", func() { o.file.RelayBudgetPeer = or(fc.RelayBudgetPeer, o.file.RelayBudgetPeer) })
	set("relay-budget-ip", func() { o.file.RelayBudgetIP = or(fc.RelayBudgetIP, o.file.RelayBudgetIP) })
	set("no-fast-path", func() { o.file.NoFastPath = o.file.NoFastPath || fc.NoFastPath })
	set("nat-public-net", func() { o.file.NATPublicNet = append(o.file.NATPublicNet, fc.NATPublicNet...) })
	set("log-level", func() { o.file.LogLevel = or(fc.LogLevel, o.file.LogLevel) })
	set("log-format", func() { o.file.LogFormat = or(fc.LogFormat, o.file.LogFormat) })
	set("cpus", func() {
		if fc.CPUs != 0 {
			o.file.CPUs = fc.CPUs
		}
	})
	set("memory", func() { o.file.Memory = or(fc.Memory, o.file.Memory) })
	set("max-input", func() { o.file.MaxInput = or(fc.MaxInput, o.file.MaxInput) })
	set("max-output", func() { o.file.MaxOutput = or(fc.MaxOutput, o.file.MaxOutput) })
	set("max-entries", func() { o.file.MaxEntries = cmp.Or(fc.MaxEntries, o.file.MaxEntries) })
	set("max-depth", func() { o.file.MaxDepth = cmp.Or(fc.MaxDepth, o.file.MaxDepth) })
	set("max-layer", func() { o.file.MaxLayer = or(fc.MaxLayer, o.file.MaxLayer) })
	set("metrics", func() { o.file.Metrics = or(fc.Metrics, o.file.Metrics) })
	set("runtime", func() { o.file.Runtime = or(fc.Runtime, o.file.Runtime) })
	set("image-cache-size", func() { o.file.ImageCacheSize = or(fc.ImageCacheSize, o.file.ImageCacheSize) })
	set("image-pull", func() { o.file.ImagePull = o.file.ImagePull || fc.ImagePull })
	set("require-image", func() { o.file.RequireImage = o.file.RequireImage || fc.RequireImage })
	set("max-job-disk", func() { o.file.MaxJobDisk = or(fc.MaxJobDisk, o.file.MaxJobDisk) })
	set("disk-reserve", func() { o.file.DiskReserve = or(fc.DiskReserve, o.file.DiskReserve) })
	set("unbounded-disk", func() { o.file.UnboundedDisk = o.file.UnboundedDisk || fc.UnboundedDisk })
	set("cpu-jobs", func() {
		if fc.CPUJobs != nil {
			o.cpuJobs = *fc.CPUJobs
		}
	})
	set("view-jobs", func() { o.file.ViewJobs = cmp.Or(fc.ViewJobs, o.file.ViewJobs) })
	set("view-bytes", func() { o.file.ViewBytes = or(fc.ViewBytes, o.file.ViewBytes) })
	set("no-locality", func() { o.file.NoLocality = o.file.NoLocality || fc.NoLocality })
	set("upload-limit", func() { o.file.UploadLimit = or(fc.UploadLimit, o.file.UploadLimit) })
	set("single-source", func() { o.file.SingleSource = o.file.SingleSource || fc.SingleSource })
	set("no-prestage", func() { o.file.NoPrestage = o.file.NoPrestage || fc.NoPrestage })
	set("hours", func() { o.file.Hours = or(fc.Hours, o.file.Hours) })
	set("reclaim-on-use", func() { o.file.ReclaimOnUse = o.file.ReclaimOnUse || fc.ReclaimOnUse })
	for _, d := range o.durationFlags(&fc) {
		if flags.Changed(d.name) || d.file == "" {
			continue
		}
		v, err := time.ParseDuration(d.file)
		if err != nil {
			return durationProblem(path, data, d.name, d.file)
		}
		*d.dst = v
	}
	return nil
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func newLogger(level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

// daemonGCPercent is the daemon's garbage-collection target unless GOGC
// says otherwise: a heap that may grow to 1.5× what is live rather than 2×.
// Measured with go run ./testnet bench --only rss: after 1,200 jobs the
// submitter's anonymous memory 46 MiB instead of 81, at no throughput
// cost the run could tell from noise. A contributor's daemon shares the
// machine with the jobs it hosts.
const daemonGCPercent = 50

func run(cmd *cobra.Command, o *options) error {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(daemonGCPercent)
	}
	// Before anything starts a child process: see notifier.
	notify, notifyErr := takeNotifySocket()
	if o.config != "" {
		if err := applyFile(cmd.Flags(), o.config, o); err != nil {
			return err
		}
	}
	log, err := newLogger(o.file.LogLevel, o.file.LogFormat)
	if err != nil {
		return err
	}
	if notifyErr != nil {
		log.Warn("not telling systemd when ready", "err", notifyErr)
	}
	var memory uint64
	if o.file.Memory != "" {
		m, err := market.ParseSize(o.file.Memory)
		if err != nil {
			return fmt.Errorf("--memory: %w", err)
		}
		memory = uint64(m)
	}
	maxInput, err := market.ParseSize(o.file.MaxInput)
	if err != nil {
		return fmt.Errorf("--max-input: %w", err)
	}
	maxOutput, err := market.ParseSize(o.file.MaxOutput)
	if err != nil || maxOutput == 0 {
		return fmt.Errorf("--max-output %q: want a size such as 1TiB", o.file.MaxOutput)
	}
	maxLayer, err := market.ParseSize(o.file.MaxLayer)
	if err != nil || maxLayer == 0 {
		return fmt.Errorf("--max-layer %q: want a size such as 64GiB", o.file.MaxLayer)
	}
	if o.file.MaxEntries < 1 || o.file.MaxDepth < 1 {
		return fmt.Errorf("--max-entries %d, --max-depth %d: want positive numbers", o.file.MaxEntries, o.file.MaxDepth)
	}
	uploadLimit, err := parseRate(o.file.UploadLimit)
	if err != nil {
		return err
	}
	budgetPeer, err := relayBudget("relay-budget-peer", o.file.RelayBudgetPeer)
	if err != nil {
		return err
	}
	budgetIP, err := relayBudget("relay-budget-ip", o.file.RelayBudgetIP)
	if err != nil {
		return err
	}
	imageCache, err := market.ParseSize(o.file.ImageCacheSize)
	if err != nil || imageCache == 0 {
		return fmt.Errorf("--image-cache-size %q: want a size such as 64GiB", o.file.ImageCacheSize)
	}
	var maxJobDisk market.Size
	if o.file.MaxJobDisk != "" {
		if maxJobDisk, err = market.ParseSize(o.file.MaxJobDisk); err != nil || maxJobDisk < market.MinDisk {
			return fmt.Errorf("--max-job-disk %q: want a size of at least %s, such as 100GiB", o.file.MaxJobDisk, market.Size(market.MinDisk))
		}
	}
	var diskReserve, diskFree market.Size
	if o.file.DiskReserve != "" {
		if diskReserve, err = market.ParseSize(o.file.DiskReserve); err != nil || diskReserve == 0 {
			return fmt.Errorf("--disk-reserve %q: want a size such as 20GiB", o.file.DiskReserve)
		}
	}
	if o.debugDiskFree != "" {
		if diskFree, err = market.ParseSize(o.debugDiskFree); err != nil {
			return fmt.Errorf("--debug-disk-free: %w", err)
		}
	}
	viewBytes, err := market.ParseSize(o.file.ViewBytes)
	if err != nil || o.file.ViewJobs < 0 {
		return fmt.Errorf("--view-jobs %d, --view-bytes %q: want a count and a size such as 16MiB, 0 for no bound", o.file.ViewJobs, o.file.ViewBytes)
	}
	if o.file.CPUs < 0 {
		return fmt.Errorf("--cpus %d: must not be negative", o.file.CPUs)
	}
	if err := countAsPublic(o.file.NATPublicNet); err != nil {
		return err
	}
	shard, err := shardFlags(o.file.Shards, o.file.Shard)
	if err != nil {
		return err
	}
	classShards, err := marketFlags(o.file.Market, o.file.ClassShards, o.file.Shards > 1 || shard != nil)
	if err != nil {
		return err
	}
	prices, err := market.ParsePriceList(o.file.Price)
	if err != nil {
		return fmt.Errorf("--price: %w", err)
	}
	if !wire.CurrencyName(o.file.Currency) {
		return fmt.Errorf("--currency %q: want at most %d lowercase letters, digits or dashes, starting with a letter", o.file.Currency, wire.MaxCurrency)
	}
	misbehave, err := o.misbehave()
	if err != nil {
		return err
	}
	var schedule *hours.Schedule
	if o.file.Hours != "" {
		s, err := hours.Parse(o.file.Hours)
		if err != nil {
			return fmt.Errorf("--hours: %w", err)
		}
		schedule = &s
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	context.AfterFunc(ctx, func() {
		// The first signal drains the node; a second one, now handled as
		// by default, stops it at once.
		stop()
		if err := notify.send("STOPPING=1"); err != nil {
			log.Warn("tell systemd", "err", err)
		}
	})
	go returnMemory(ctx)
	// e31 doctor: e31d doctor's checks, with this daemon's configuration.
	checkMachine := func(ctx context.Context) api.DoctorReport {
		return doctor.Run(ctx, doctor.Machine{}, doctor.Options{
			DataDir:         o.file.Data,
			ImageCacheBytes: int64(imageCache),
			DiskReserve:     uint64(diskReserve),
			UnboundedDisk:   o.file.UnboundedDisk,
			Listen:          o.file.Listen,
			Runtime:         o.file.Runtime,
		})
	}
	if err := checkAtStart(log, doctor.Machine{}, doctor.Options{
		DataDir:         o.file.Data,
		ImageCacheBytes: int64(imageCache),
		DiskReserve:     uint64(diskReserve),
	}, o.debugDiskFree != ""); err != nil {
		return err
	}
	n, err := node.New(ctx, node.Config{
		CPUs:              o.file.CPUs,
		MemoryBytes:       memory,
		MaxInputBytes:     int64(maxInput),
		MaxOutputBytes:    int64(maxOutput),
		MaxEntries:        o.file.MaxEntries,
		MaxDepth:          o.file.MaxDepth,
		MaxLayerBytes:     int64(maxLayer),
		DataDir:           o.file.Data,
		Listen:            o.file.Listen,
		Bootstrap:         o.file.Bootstrap,
		API:               o.file.API,
		UI:                o.file.UI,
		SimGPUs:           o.file.SimGPUs,
		DiscoverGPUs:      nvidia.Discover,
		OpenGPUUse:        openGPUUse,
		Hours:             schedule,
		ReclaimOnUse:      o.file.ReclaimOnUse,
		ReclaimIdle:       o.reclaimIdle,
		PunchWait:         o.punchWait,
		Network:           o.file.Network,
		Shards:            o.file.Shards,
		Shard:             shard,
		Market:            o.file.Market,
		ClassShards:       classShards,
		Prices:            prices,
		Currency:          o.file.Currency,
		MDNS:              o.file.MDNS,
		NAT:               o.file.NAT,
		RelayService:      o.file.RelayService,
		RelayData:         o.file.RelayData,
		RelayPerDay:       o.file.RelayPerDay,
		RelayBudgetPeer:   budgetPeer,
		RelayBudgetIP:     budgetIP,
		RelayBudgetWindow: o.relayBudgetWindow,
		NoFastPath:        o.file.NoFastPath,
		Heartbeat:         o.heartbeat,
		Epoch:             o.epoch,
		EpochDelay:        o.epochDelay,
		DigestEvery:       o.digestEvery,
		MoveAfter:         o.moveAfter,
		ReceiptInterval:   o.receiptInterval,
		Grace:             o.grace,
		GangStartWithin:   o.gangStartWithin,
		OutputTimeout:     o.outputTimeout,
		ProposalTTL:       o.proposalTTL,
		StallTimeout:      o.stallTimeout,
		Retention:         o.retention,
		ProviderLostAfter: o.providerLost,
		Metrics:           o.file.Metrics,
		Runtime:           o.file.Runtime,
		ImageCacheBytes:   int64(imageCache),
		ImagePull:         o.file.ImagePull,
		RequireImage:      o.file.RequireImage,
		MaxJobDisk:        uint64(maxJobDisk),
		DiskReserve:       uint64(diskReserve),
		UnboundedDisk:     o.file.UnboundedDisk,
		NoCPUJobs:         !o.cpuJobs,
		DebugDiskFree:     uint64(diskFree),
		View:              view.Bounds{Jobs: noBound(o.file.ViewJobs), DeclarationBytes: int64(noBound(int(viewBytes)))},
		NoLocality:        o.file.NoLocality,
		LocalityWait:      o.localityWait,
		AvoidFor:          o.avoidFor,
		StopDrain:         o.stopDrain,
		UploadLimit:       uploadLimit,
		SingleSource:      o.file.SingleSource,
		NoPrestage:        o.file.NoPrestage,
		DebugPartition:    o.debugPartition,
		Doctor:            checkMachine,
		Misbehave:         misbehave.provider,
		RawContent:        misbehave.rawContent,
		Log:               log,
		OnReady: func(info node.RunInfo) {
			if err := notify.send("READY=1\nSTATUS=serving the API on " + info.API); err != nil {
				log.Warn("tell systemd", "err", err)
			}
		},
	})
	if err != nil {
		return err
	}
	return n.Run(ctx)
}

func main() {
	if err := newCommand().Execute(); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "e31d:", err)
		os.Exit(1)
	}
}

// parseRate parses a byte rate such as "100MiB/s" (the "/s" may be left
// out); empty means no limit (0).
func parseRate(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	n, err := market.ParseSize(strings.TrimSuffix(s, "/s"))
	if err != nil || n == 0 {
		return 0, fmt.Errorf("--upload-limit %q: want a rate such as 100MiB/s", s)
	}
	return int64(n), nil
}

// shardFlags checks --shards and --shard; the shard is nil when the peer
// ID is to pick it.
func shardFlags(count int, index string) (*int, error) {
	if err := (p2p.Shard{Count: count}).Valid(); err != nil || count < 1 {
		return nil, fmt.Errorf("--shards %d: want a power of two from 1 to %d", count, p2p.MaxShards)
	}
	if index == "" {
		return nil, nil
	}
	i, err := strconv.Atoi(index)
	if err == nil {
		err = p2p.Shard{Index: i, Count: count}.Valid()
	}
	if err != nil {
		return nil, fmt.Errorf("--shard %q: want a shard from 0 to %d (--shards %d)", index, count-1, count)
	}
	return &i, nil
}

// openGPUUse reads who uses the real GPUs through NVML, for
// --reclaim-on-use.
func openGPUUse(ctx context.Context, log *slog.Logger) node.GPUUse {
	return nvidia.OpenUse(ctx, nvidia.UseOptions{IsSandbox: exec.NotOwnersUse, Log: log})
}

// relayBudget reads a relay byte budget flag: a size, 0 for no bound
// (node.Config's negative).
func relayBudget(flag, s string) (int64, error) {
	v, err := market.ParseSize(s)
	if err != nil {
		return 0, fmt.Errorf("--%s %q: want a size such as 32GiB, or 0 for no bound", flag, s)
	}
	if v == 0 {
		return -1, nil
	}
	return int64(v), nil
}

// noBound maps a flag's 0, no bound, to view.Bounds' negative.
func noBound(n int) int {
	if n == 0 {
		return -1
	}
	return n
}
