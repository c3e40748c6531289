// Package offer is what a provider node says it offers, and when it says
// so: its GPUs, CPUs and memory, whether it runs jobs in their own image,
// how peers reach it, the data it holds for data gravity (Holdings), its
// heartbeat and the gossip delay it observed, published on the offers
// topic by a Publisher.
//
// An offer is published at start, every heartbeat, and whenever it changes
// in a way the network does not learn otherwise. A change that only takes
// GPUs, for a lease, is not published: the lease's own announcement tells
// every peer that those GPUs are held, and its release that they are free
// again (view.Market marks them leased in between). So a lease and its
// release cost the network two messages, not four. A GPU that the last
// published offer showed held and that is now free is published at once,
// or peers would keep it out of Match until the next heartbeat.
//
// The offer also says the largest disk the node can grant a job now, or
// that it lends none (node/diskroom): a lease's announcement does not say
// what disk it took, so a change of that figure is published at once. It
// is rounded so that it changes only when the change matters.
package offer
