// Package view is what a node knows of the network, as Match needs it: the
// providers' latest offers (Offers) and the jobs topic's open jobs, leases
// and releases (Market), each kept with when its author signed it and when
// it arrived (Stamp), so that the view of an epoch can be cut as it stood at
// the epoch's cutoff and every peer decides on the same facts. It also
// keeps the gossip delays a node observed (GossipDelays), which a provider
// announces in its offers, and the rule that turns those announcements into
// each epoch's delay (DelayRule); market/doc.go, "The epoch's view", states
// the rule. And it holds the checks of incoming jobs messages that need
// those facts (ValidateJobMessage).
//
// Each view has its own lock, held only over memory. The one order
// between them: the Market's Current asks the epoch clock, which reads the
// Offers, with the Market's lock held; nothing calls into a Market with an
// Offers lock held.
package view
