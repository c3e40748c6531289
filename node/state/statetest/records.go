package statetest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/e31network/e31/node/state"
)

// Records is a record store in memory with state.Store's methods and
// behaviour: Put stores v's JSON under prefix+id, Get decodes it, Each
// visits the records under a prefix in key order, and Delete removes one.
// Each sees the records as they were when it was called, as a Badger read
// transaction does, so fn may Put or Delete.
//
// The zero value is empty and ready to use; it is safe for concurrent use.
type Records struct {
	mu   sync.Mutex
	m    map[string][]byte // guarded by mu: JSON by key (prefix+id)
	fail error             // guarded by mu: Put returns it when set
}

// Put stores v as JSON under prefix+id.
func (r *Records) Put(prefix, id string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return fmt.Errorf("save %s%s: %w", prefix, id, r.fail)
	}
	if r.m == nil {
		r.m = map[string][]byte{}
	}
	r.m[prefix+id] = b
	return nil
}

// PutAll stores each item as Put does, all or none.
func (r *Records) PutAll(prefix string, items []state.Item) error {
	enc := make(map[string][]byte, len(items))
	for _, it := range items {
		b, err := json.Marshal(it.Value)
		if err != nil {
			return err
		}
		enc[prefix+it.ID] = b
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return fmt.Errorf("save %d records under %s: %w", len(items), prefix, r.fail)
	}
	if r.m == nil {
		r.m = map[string][]byte{}
	}
	for k, b := range enc {
		r.m[k] = b
	}
	return nil
}

// Get loads the record under prefix+id into v; false if there is none.
func (r *Records) Get(prefix, id string, v any) (bool, error) {
	r.mu.Lock()
	b, ok := r.m[prefix+id]
	r.mu.Unlock()
	if !ok {
		return false, nil
	}
	// b is never written after Put stores it: decoding it unlocked is safe.
	if err := json.Unmarshal(b, v); err != nil {
		return false, err
	}
	return true, nil
}

// Each calls fn with every record under prefix, in key order, and stops at
// the first error fn returns. fn is given a copy it may keep or change.
func (r *Records) Each(prefix string, fn func(b []byte) error) error {
	r.mu.Lock()
	var keys []string
	for k := range r.m {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	// Byte order, as Badger's keys are sorted.
	slices.Sort(keys)
	vals := make([][]byte, len(keys))
	for i, k := range keys {
		vals[i] = r.m[k]
	}
	r.mu.Unlock()
	for _, b := range vals {
		if err := fn(bytes.Clone(b)); err != nil {
			return err
		}
	}
	return nil
}

// Delete removes the record under prefix+id; removing one that is not
// there is no error.
func (r *Records) Delete(prefix, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.m, prefix+id)
	return nil
}

// FailPuts makes every later Put fail with err (wrapped), as a full disk
// would, and store nothing; nil makes them succeed again.
func (r *Records) FailPuts(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fail = err
}
