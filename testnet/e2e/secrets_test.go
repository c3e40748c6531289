package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/state"
	"github.com/e31network/e31/p2p"
	"github.com/e31network/e31/testnet/cluster"
	"github.com/e31network/e31/testnet/poll"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"golang.org/x/sys/unix"
)

// gossipTap is a bare libp2p host subscribed to a network's topics, as
// any stranger may be: it keeps every message it is sent.
type gossipTap struct {
	topics map[string]*pubsub.Topic
	// connect dials a node at its addresses.
	connect func(addrs []string)

	mu   sync.Mutex
	data [][]byte // guarded by mu: each message's bytes
	by   map[string]int
}

func newGossipTap(t *testing.T, network string) *gossipTap {
	t.Helper()
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	h, err := p2p.NewHost(p2p.HostConfig{Key: key, Listen: []string{"/ip4/127.0.0.1/tcp/0"}, UserAgent: "e31-tap"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); h.Close() })
	ps, err := pubsub.NewGossipSub(ctx, h, p2p.MessageOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	g := &gossipTap{topics: map[string]*pubsub.Topic{}, by: map[string]int{}}
	for _, short := range []string{p2p.TopicOffers, p2p.TopicJobs} {
		topic, err := ps.Join(p2p.TopicName(network, short))
		if err != nil {
			t.Fatal(err)
		}
		sub, err := topic.Subscribe()
		if err != nil {
			t.Fatal(err)
		}
		g.topics[short] = topic
		go func() {
			for {
				m, err := sub.Next(ctx)
				if err != nil {
					return
				}
				g.mu.Lock()
				g.data = append(g.data, bytes.Clone(m.Data))
				g.by[short]++
				g.mu.Unlock()
			}
		}()
	}
	g.connect = func(addrs []string) {
		for _, a := range addrs {
			ai, err := peer.AddrInfoFromString(a)
			if err != nil {
				t.Fatal(err)
			}
			if err := h.Connect(ctx, *ai); err != nil {
				t.Fatalf("tap: connect %s: %v", ai.ID, err)
			}
		}
	}
	return g
}

// seen is how many messages the tap got on a topic (short name).
func (g *gossipTap) seen(short string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.by[short]
}

// all is every message the tap got, one after the other.
func (g *gossipTap) all() []byte {
	g.mu.Lock()
	defer g.mu.Unlock()
	return bytes.Join(g.data, []byte("\n"))
}

// leaks names the forms of a value that b holds: the bytes themselves, or
// base64 (how JSON carries bytes).
func leaks(b, value []byte) string {
	switch {
	case bytes.Contains(b, value):
		return "the value"
	case bytes.Contains(b, []byte(base64.StdEncoding.EncodeToString(value))):
		return "the value in base64"
	}
	return ""
}

func randomHex(t *testing.T, prefix string) []byte {
	t.Helper()
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return []byte(prefix + hex.EncodeToString(b))
}

// TestSecretsReachOnlyTheJob: a job reads two secrets, one from the
// submitter's variable and one from a file, as variables and as files
// under /run/secrets, and writes only their hashes. The values appear
// nowhere else: not in any node's data dir (every store, Badger's files
// read raw, the logs, the leases' folders), not in a ledger's export, not
// in the job's status, not in anything the gossip carried to a stranger
// on both topics. The submitter's own record store holds them, under the
// secrets' prefix alone, until the job has ended, and then drops them.
func TestSecretsReachOnlyTheJob(t *testing.T) {
	// Node 0 submits; node 1's H100 runs the job; node 2, an A100, is a
	// provider Match does not choose.
	c := start(t, cluster.Options{N: 3, SimGPUsByNode: []string{"", "1xH100:80GiB", "1xA100:40GiB"}})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	tap := newGossipTap(t, "testnet")
	for _, n := range c.Nodes {
		tap.connect(n.Addrs)
	}
	// A stranger on the topics hears what every peer hears: the offers
	// reach it before the job is submitted.
	poll.Until(t, "the tap to hear the providers' offers", 30*time.Second, func() bool { return tap.seen(p2p.TopicOffers) >= 2 })
	for short, topic := range tap.topics {
		poll.Until(t, "every node on the tap's "+short+" topic", 30*time.Second, func() bool { return len(topic.ListPeers()) >= len(c.Nodes) })
	}

	token, creds := randomHex(t, "hf_"), randomHex(t, "{\"aws_secret_access_key\": \"")
	credsFile := filepath.Join(t.TempDir(), "creds.json")
	if err := os.WriteFile(credsFile, creds, 0o600); err != nil {
		t.Fatal(err)
	}
	// Set once the daemons run: e31 reads it, no daemon inherits it.
	t.Setenv("HF_TOKEN", string(token))
	script := `set -e
printf %s "$HF_TOKEN" | sha256sum | cut -d' ' -f1 > /out/env.sha
sha256sum /run/secrets/HF_TOKEN /run/secrets/CREDS | cut -d' ' -f1 > /out/files.sha
stat -c %a /run/secrets/HF_TOKEN > /out/mode`
	out, code := runE31(t, ctx, c.Nodes[0].API, "submit", "--json", "--secret", "HF_TOKEN", "--secret", "CREDS=file:"+credsFile,
		"--name", "secret-reader", "--gpus", "1", "--gpu-model", "H100", "--limit", "5m", "--", "sh", "-c", script)
	if code != 0 {
		t.Fatalf("e31 submit exited %d:\n%s", code, out)
	}
	var j api.Job
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &j); err != nil || j.ID == "" {
		t.Fatalf("e31 submit --json: %v\n%s", err, out)
	}
	sub := c.Client(0)
	end := waitJob(t, sub, j.ID, 3*time.Minute, "released", released)
	if end.Outcome != "completed" || end.Provider != c.Nodes[1].PeerID {
		t.Fatalf("the job ended %s (%s) on %s, want completed on node 1 %s", end.Outcome, end.Reason, end.Provider, c.Nodes[1].PeerID)
	}
	got := t.TempDir()
	if out, code := runE31(t, ctx, c.Nodes[0].API, "get", j.ID, "-o", got); code != 0 {
		t.Fatalf("e31 get exited %d:\n%s", code, out)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(got, "out", name))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	hash := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
	if read("env.sha") != hash(token) || read("files.sha") != hash(token)+"\n"+hash(creds) || read("mode") != "400" {
		t.Fatalf("the job read: $HF_TOKEN %s, files %q, mode %s; want %s, %s and %s, 400",
			read("env.sha"), read("files.sha"), read("mode"), hash(token), hash(token), hash(creds))
	}

	// Both ledgers settled, then what every node exports and shows.
	waitFinal(t, sub, j.ID)
	waitFinal(t, c.Client(1), j.ID)
	var shown [][]byte
	for i, n := range c.Nodes {
		export := filepath.Join(t.TempDir(), "receipts.json")
		if out, code := runE31(t, ctx, n.API, "receipts", "export", "-o", export); code != 0 {
			t.Fatalf("node %d: e31 receipts export exited %d:\n%s", i, code, out)
		}
		b, err := os.ReadFile(export)
		if err != nil {
			t.Fatal(err)
		}
		shown = append(shown, b)
	}
	for _, args := range [][]string{{"status", j.ID, "--json"}, {"list", "--json"}, {"receipts", "--job", j.ID, "--json"}, {"logs", j.ID}} {
		out, _ := runE31(t, ctx, c.Nodes[0].API, args...)
		shown = append(shown, []byte(out))
	}
	// The job has ended for good: the submitter drops the values.
	subLog := filepath.Join(c.Nodes[0].Data, "e31d.log")
	poll.Until(t, "the submitter to drop the job's secrets", 30*time.Second, func() bool {
		b, _ := os.ReadFile(subLog)
		return bytes.Contains(b, []byte("secrets dropped")) && bytes.Contains(b, []byte(j.ID))
	})
	if decl := tap.all(); !bytes.Contains(decl, []byte(`{"name":"HF_TOKEN"}`)) || !bytes.Contains(decl, []byte("secret-reader")) {
		t.Fatalf("the tap did not hear the declaration (%d messages on the jobs topic)", tap.seen(p2p.TopicJobs))
	}
	c.Stop()

	for name, value := range map[string][]byte{"HF_TOKEN": token, "CREDS": creds} {
		if how := leaks(tap.all(), value); how != "" {
			t.Errorf("the gossip carried %s of %s", how, name)
		}
		for i, b := range shown {
			if how := leaks(b, value); how != "" {
				t.Errorf("what node 0 shows or a ledger exports (%d) holds %s of %s", i, how, name)
			}
		}
		for i, n := range c.Nodes {
			subState := filepath.Join(n.Data, "state")
			err := filepath.WalkDir(n.Data, func(p string, d fs.DirEntry, err error) error {
				if err != nil || !d.Type().IsRegular() {
					return err
				}
				if i == 0 && strings.HasPrefix(p, subState+string(filepath.Separator)) {
					return nil // read key by key below
				}
				for _, form := range [][]byte{value, []byte(base64.StdEncoding.EncodeToString(value))} {
					found, err := fileHolds(p, form)
					if err != nil {
						return err
					}
					if found {
						t.Errorf("node %d: %s holds the value of %s (%d bytes: raw, or in base64)", i, p, name, len(form))
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	checkSecretsOnlyUnderTheirPrefix(t, filepath.Join(c.Nodes[0].Data, "state"), j.ID, token, creds)
}

// fileHolds reports whether the file at path holds needle, reading only
// the parts of it that hold data: a job's disk and the disk templates are
// sparse files of request.disk (10 GiB), nearly all holes, and the whole
// file is never in memory, only a window of it.
func fileHolds(path string, needle []byte) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return false, err
	}
	const window = 1 << 20
	buf := make([]byte, window+len(needle))
	for off := int64(0); off < st.Size(); {
		start, err := f.Seek(off, unix.SEEK_DATA)
		if err != nil {
			if errors.Is(err, unix.ENXIO) {
				return false, nil // only a hole from off on
			}
			return false, err
		}
		end, err := f.Seek(start, unix.SEEK_HOLE)
		if err != nil {
			return false, err
		}
		// One data extent, a window at a time; each window starts the
		// needle's length before the last one ended, so that a needle
		// across two windows is seen.
		for at := start; at < end; at += window {
			from := max(start, at-int64(len(needle)))
			n, err := f.ReadAt(buf[:min(int64(len(buf)), end-from)], from)
			if err != nil && !errors.Is(err, io.EOF) {
				return false, err
			}
			if bytes.Contains(buf[:n], needle) {
				return true, nil
			}
		}
		off = end
	}
	return false, nil
}

// checkSecretsOnlyUnderTheirPrefix opens a stopped node's record store and
// reads every version of every key that compaction left: a value of a
// secret is only ever under the secrets' prefix, and the job's is
// deleted.
func checkSecretsOnlyUnderTheirPrefix(t *testing.T, dir, job string, values ...[]byte) {
	t.Helper()
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		t.Fatalf("open the submitter's record store: %v", err)
	}
	defer db.Close()
	err = db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{AllVersions: true})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			key := string(item.KeyCopy(nil))
			if item.IsDeletedOrExpired() {
				continue
			}
			v, err := item.ValueCopy(nil)
			if err != nil {
				return err
			}
			for _, value := range values {
				if leaks(v, value) == "" {
					continue
				}
				if !strings.HasPrefix(key, state.PrefixSecret) {
					t.Errorf("the record %s holds a secret's value", key)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.View(func(txn *badger.Txn) error {
		_, err := txn.Get([]byte(state.PrefixSecret + job))
		return err
	}); err != badger.ErrKeyNotFound {
		t.Errorf("%s%s after the job ended: %v, want it deleted", state.PrefixSecret, job, err)
	}
}

// fileHolds finds a value in a sparse file wherever it lies: across two
// of its windows, or after a hole, and not where it is not.
func TestFileHolds(t *testing.T) {
	needle := []byte("needle-in-a-sparse-file")
	p := filepath.Join(t.TempDir(), "sparse")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(1 << 30); err != nil {
		t.Fatal(err)
	}
	if found, err := fileHolds(p, needle); err != nil || found {
		t.Fatalf("an empty sparse file: %v, %v", found, err)
	}
	// Three windows of data at the start, then a hole.
	if _, err := f.WriteAt(bytes.Repeat([]byte{'x'}, 3<<20), 0); err != nil {
		t.Fatal(err)
	}
	if found, err := fileHolds(p, needle); err != nil || found {
		t.Fatalf("a file without the needle: %v, %v", found, err)
	}
	for _, at := range []int64{1<<20 - 5, 2<<20 + 7, 512 << 20, 1<<30 - int64(len(needle))} {
		if _, err := f.WriteAt(needle, at); err != nil {
			t.Fatal(err)
		}
		found, err := fileHolds(p, needle)
		if err != nil || !found {
			t.Fatalf("the needle at %d: %v, %v", at, found, err)
		}
		if _, err := f.WriteAt(bytes.Repeat([]byte{'x'}, len(needle)), at); err != nil {
			t.Fatal(err)
		}
	}
}
