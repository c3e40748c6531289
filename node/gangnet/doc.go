// Package gangnet gives the parts of a gang job a private network between
// them and nothing else. A gang runs N parts on N providers (multi-machine
// training, torch.distributed); each part runs in its own runc sandbox,
// which otherwise has no network but loopback. Each part gets an address
// of its own on an interface inside its sandbox, and reaches the other
// parts' addresses, on any port and any protocol over IPv4, through the
// daemons, over libp2p streams: hole-punched or relayed as any lease's
// connection is.
//
// # The design
//
// For each part its provider's daemon makes a network namespace,
// e31-<lease> under /run/netns, holding only lo and a TUN device, e31g0,
// with the part's address and no default route. The sandbox joins that
// namespace: its OCI spec names NetNSPath as its network namespace's path.
// The daemon keeps the TUN device's file. What the part sends to another
// member's address leaves the kernel inside as whole IPv4 packets on that
// file; the daemon writes each into the libp2p stream to that member's
// daemon, which writes it into its own part's TUN device. Each pair of
// parts has one stream, dialled by the lower rank (Registry.Open); the
// higher rank accepts it only from the daemon named for that rank.
//
// The kernel's own TCP runs at both ends, inside the namespaces; the
// daemons run no TCP/IP stack and never look past an IPv4 header. The
// other way to do this is a user-space stack in the daemon (gVisor's
// netstack, as wireguard-go's tun/netstack uses it), with the sandbox's
// sockets reached through a proxy or an LD_PRELOAD shim. That needs no
// root, but every byte then goes through a TCP implementation in Go,
// slower than the kernel's and without its congestion control, offloads
// and tuning, and only the protocols the proxy knows work (NCCL, Gloo and
// MPI open sockets of their own, on ports they pick). A TUN device gives
// the part the real thing: the kernel's TCP at full speed, UDP, ICMP, any
// port, unchanged programs. Its price is root, to make a namespace and a
// TUN device, and the provider has root anyway to run runc.
//
// The MTU is 65,535 (MTU), the most a TUN device takes and the most an
// IPv4 packet can be, so the kernel inside hands the daemon 64 KiB
// segments: one read, one frame and one write per 64 KiB, not per 1.5 KiB.
// Nothing in between fragments them: the stream carries them whole.
//
// # Joining from runc
//
// The OCI spec names NetNSPath as the path of its network namespace. A
// sandbox in a user namespace must also bind SysfsPath at /sys (read-only)
// instead of mounting a sysfs: the kernel mounts a sysfs only for a process
// whose user namespace owns its network namespace, and the provider's owns
// this one, so runc's sysfs mount fails with EPERM (runc 1.1 does not fall
// back). SysfsPath is a sysfs that the daemon mounted from inside the
// namespace, so /sys/class/net shows lo and e31g0, not the provider's
// interfaces. TestRuncJoinsGangNetwork runs busybox under runc both ways,
// with exec's mounts.
//
// # Addresses
//
// The subnet is 10.31.0.0/24 unless Config.Subnet says otherwise; rank r
// has the (r+1)th address, 10.31.0.1 for rank 0, 10.31.0.2 for rank 1
// (Net.Addr), held on e31g0 as /24, which also routes the subnet there.
// Every gang may use the same subnet: each part's namespace is its own, and
// only the addresses of its own gang's members lead anywhere.
//
// # What passes
//
// Isolation is the point: a sandbox must reach its gang's other parts and
// nothing else, and must not pass as another part. The daemon checks every
// packet's IPv4 header both ways:
//
//   - From the part: forwarded only if its source is the part's own
//     address and its destination another member's, to that member's
//     stream. So a part cannot reach the provider, the Internet, another
//     gang, or an unused address of its subnet, and cannot claim another
//     part's address.
//   - From a stream: written into the part's TUN device only if its source
//     is the address of the member whose stream it came by, and its
//     destination is the part's own address. So a daemon, honest or not,
//     can speak only for the part it runs.
//   - Anything else is dropped and counted under a reason (Stats.Drops):
//     IPv6 and anything not IPv4 among it. IPv6 is turned off inside, so
//     the kernel there sends none.
//   - A stream is admitted only if its hello names an open gang, a rank
//     lower than this part's as the dialer's, and this part's rank as the
//     dialled one, and comes from the peer named for the dialer's rank;
//     anything else is refused and counted (Stats.Refused).
//
// The sandbox cannot change any of it. The namespace belongs to the
// provider's user namespace: a sandbox in a user namespace of its own (an
// image job) has no capability over it whatever it holds inside, and one
// in none runs with no capabilities at all (exec's spec); either way it
// cannot add an address, a route or an interface, or take e31g0 down.
// Even if it could, the daemon's checks above would still hold. Its lo is
// its own, so 127.0.0.1 inside is not the provider's.
//
// A dropped packet is silent, as it is on a firewall that drops: a connect
// to a non-member times out rather than being refused.
//
// # On the stream
//
// A stream opens with a hello (the gang, the dialer's rank, the dialled
// rank) and a one-byte reply; then each side writes frames, a uint16
// length and one packet, never empty and never longer than the MTU. A
// writer goroutine per stream drains a bounded queue (64 packets): small
// packets go through a large buffered writer, flushed when the queue runs
// dry, so that those of a busy connection (ACKs, requests) leave together;
// a big one is written as it was read from the TUN device, its length
// already in front, with no copy. A packet that finds the queue full is
// dropped, as a router's full queue drops, and TCP inside retransmits; a
// slow member's stream never holds up the others'. The reader hands each
// packet to the TUN device from its buffer. Both decoders read what peers
// send, are fuzzed, and refuse what they do not expect by resetting the
// stream.
//
// # Speed
//
// On one 2-core machine, with both daemons, both parts and TLS on the same
// two cores, BenchmarkThroughput measured TCP through the gang network at
// 0.5 to 0.9 times a raw libp2p stream between the same hosts (570 to
// 1,000 MB/s against 860 to 1,350 MB/s; most of either is TLS and
// loopback TCP), and BenchmarkRTT a one-byte TCP round trip at 32 to 47
// µs, 1.5 to 1.9 times ping's ns/op and 2 to 2.6 times the round trip
// that ping times itself: each way adds the kernel's TCP at both ends and
// two wake-ups, TUN device to daemon and daemon to part, to ping's path.
//
// # Lifetime
//
// Registry.Open makes the namespace and starts forwarding; the lower rank
// redials with backoff whenever its stream breaks. Net.Ready waits until
// every member's stream is up, and the gang's run starts only then.
// Net.Close ends the streams, closes the TUN device (which removes it) and
// unmounts and removes the namespace's name. A daemon that dies loses its
// TUN devices with its files; the names of its namespaces stay, and Sweep,
// at the next start, removes them.
package gangnet
