package rogue

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/testnet/bench"
	"github.com/e31network/e31/testnet/byzantine/rogue"
	"github.com/e31network/e31/testnet/cluster"
)

// DefaultRelayBudget is RelayNet's relay byte budget per peer: small
// enough that the lease's circuit of the relay abuse outruns it at once.
const DefaultRelayBudget = 1 << 20

// RelayNet is the network of the relay abuse, for cluster.Start (the
// caller sets Dir and Bin): one daemon, a relay that carries data
// (--relay-service --relay-data) with a byte budget of budget a peer,
// logging at debug, where the relay names what it refuses and cuts.
func RelayNet(budget int64) cluster.Options {
	return cluster.Options{
		N: 1, SimGPUsByNode: []string{""},
		Heartbeat: heartbeat, Network: Network, Metrics: true,
		Args: append(commonArgs(providerEpoch), "--relay-service", "--relay-data",
			"--relay-budget-peer", market.Size(budget).String(), "--log-level", "debug"),
	}
}

// relayLines are what the relay's log says of each kind of refusal and
// cut the abuse should meet: a line holding every one of the words.
var relayLines = []struct {
	name  string
	words []string
}{
	{"slot refused to a stranger", []string{"relay slot refused", "reason=stranger"}},
	{"circuit refused to a stranger", []string{"relay circuit refused", "reason=stranger"}},
	{"circuit cut past its allowance", []string{"relay cut a circuit", "reason=allowance"}},
	{"byte budget spent", []string{"relay byte budget spent", "budget=peer"}},
	{"circuit cut for its budget", []string{"relay cut a circuit", "reason=budget"}},
}

// RelayAttacks plays the relay abuse on c, a RelayNet of budget, whose
// node 0 is the relay: a stranger asks it for a slot and a circuit, and a
// rogue and its accomplice, both members, push bytes through it with no
// lease and then under one. Outcome.Relay holds the relay's e31_relay_*
// series at the end, and the result's notes what its log named.
func RelayAttacks(ctx context.Context, c *cluster.Cluster, o Options) (Outcome, error) {
	o = o.withDefaults()
	out := newOutcome()
	relay := c.Nodes[0]
	if len(relay.Addrs) == 0 {
		return out, fmt.Errorf("the relay %s has no address", relay.Name)
	}
	cfg := func(name string) rogue.Config {
		cfg := rogueConfig(storeDir(o.Dir, name), providerEpoch, o)
		cfg.Relays = []string{relay.Addrs[0]}
		return cfg
	}
	var rs rogues
	defer rs.close()
	attacker, err := rs.join(ctx, c, cfg("relay"))
	if err != nil {
		return out, err
	}
	accomplice, err := rs.join(ctx, c, cfg("accomplice"))
	if err != nil {
		return out, err
	}
	out.Rogues[rogue.AttackRelay], out.Victims[rogue.AttackRelay] = attacker.ID().String(), 0

	o.Log("rogue relay: %s", rogue.AttackRelay)
	res, aerr := attacker.AbuseRelay(ctx, rogue.RelayOptions{Relay: relay.Addrs[0], Accomplice: accomplice, Push: o.RelayPush, Budget: o.RelayBudget})

	m, err := bench.Scrape(ctx, relay.Metrics)
	if err != nil {
		return out, err
	}
	out.Relay = map[string]float64{}
	for series, v := range m {
		if strings.HasPrefix(series, "e31_relay_") && v > 0 {
			out.Relay[series] = v
		}
	}
	log, err := os.ReadFile(filepath.Join(relay.Data, "e31d.log"))
	if err != nil {
		return out, err
	}
	var named []string
	for _, l := range relayLines {
		if LogNames(string(log), l.words...) {
			named = append(named, l.name)
		}
	}
	res.Notes = append(res.Notes, fmt.Sprintf("relay counted: %s", relaySeries(out.Relay)),
		"relay log named: "+strings.Join(named, ", "))
	out.add(res, aerr)
	if out.Refused[relay.Name], err = refused(ctx, relay); err != nil {
		return out, err
	}
	return out, nil
}

// LogNames reports whether a line of log holds every one of words.
func LogNames(log string, words ...string) bool {
	for line := range strings.Lines(log) {
		all := true
		for _, w := range words {
			all = all && strings.Contains(line, w)
		}
		if all {
			return true
		}
	}
	return false
}

// relaySeries writes the relay's refusals and cuts, by reason, short.
func relaySeries(m map[string]float64) string {
	var parts []string
	for _, s := range []struct{ name, label, value string }{
		{"e31_relay_reservations_refused_total", "reason", "stranger"},
		{"e31_relay_circuits_refused_total", "reason", "stranger"},
		{"e31_relay_circuits_ended_total", "reason", "allowance"},
		{"e31_relay_circuits_ended_total", "reason", "unpaired"},
		{"e31_relay_circuits_ended_total", "reason", "budget"},
		{"e31_relay_budgets_spent_total", "budget", "peer"},
		{"e31_relay_bytes_total", "circuit", "control"},
		{"e31_relay_bytes_total", "circuit", "data"},
	} {
		if v := m[fmt.Sprintf("%s{%s=%q}", s.name, s.label, s.value)]; v > 0 {
			parts = append(parts, fmt.Sprintf("%s{%s} %v", strings.TrimPrefix(s.name, "e31_relay_"), s.value, v))
		}
	}
	return strings.Join(parts, ", ")
}
