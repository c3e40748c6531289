// Package netns builds a small internet out of Linux network namespaces, so
// that tests and benchmarks can put peers behind real NATs on one machine:
//
//	[HomeA 192.168.31.2]--lan--[RouterA 10.31.0.2]--\
//	                                                 br0 [Pub 10.31.0.1]
//	[HomeB 192.168.32.2]--lan--[RouterB 10.31.0.3]--/
//
// Pub is the public side: a bridge with one address of its own, for a
// bootstrap peer or relay. Each router masquerades its home network behind
// its wan address and drops new connections arriving on wan, as a home router
// does; a hole punch gets through that. Options.RouterA makes RouterA another
// kind of home router (Router): one that answers what it refuses with a reset
// or an ICMP error, one that maps each connection to a random port (a
// symmetric NAT, no use to a punch), or one that drops every packet from its
// wan side that does not come from Pub, conntracked or not: the firewall no
// hole punch gets through.
//
// Every address exists only inside the namespaces New creates; none of them
// has a route to the machine's own network, so nothing started inside can
// send a packet beyond them. The "internet" 10.31.0.0/24 is a private range,
// which libp2p counts as private and will not hole-punch towards: a process
// inside must be told to count Internet as public (e31d --nat-public-net).
//
// Processes run inside with Command, which uses nsenter --net and not
// ip netns exec: the latter remounts /sys, which hides the cgroup mounts an
// OCI runtime needs. Only the network namespace changes, so the filesystem
// (data dirs, unix sockets of local APIs) is shared with the caller.
//
// Building a Net needs root and the ip, nft and nsenter commands (iproute2,
// nftables, util-linux); Available says what is missing.
package netns
