// Package view is what a node knows of the network, as Match needs it: the
// providers' latest offers (Offers) and the jobs topic's open jobs, leases
// and releases (Market), each kept with when it arrived, so that the view of
// an epoch can be cut as it stood at the epoch's cutoff and every peer
// decides on the same facts. It also holds the checks of incoming jobs
// messages that need those facts (ValidateJobMessage).
//
// Each view has its own lock, held only over memory.
package view
