package badgerdb

import (
	"errors"
	"fmt"
	"strings"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/ristretto/v2/z"
)

// Open opens a Badger store with opts, past a fault of Badger's own after a
// crash (dgraph-io/badger#2207): a process killed between creating a
// memtable's file and sizing it leaves the file empty, and the next open
// sizes it, then fails with "Create a new file" (z.NewFile). The file
// holds nothing, and the open that failed has made it whole: a second
// open succeeds. Open tries once more on that error alone, and says so in
// the error if the second fails too.
func Open(opts badger.Options) (*badger.DB, error) {
	db, err := badger.Open(opts)
	if err == nil || !emptyMemtable(err) {
		return db, err
	}
	if opts.Logger != nil {
		opts.Logger.Warningf("store in %s: an empty memtable file, left by a crash; opening again", opts.Dir)
	}
	db, err2 := badger.Open(opts)
	if err2 != nil {
		return nil, fmt.Errorf("%w (opened again after an empty memtable file, left by a crash: %w)", err2, err)
	}
	return db, nil
}

// emptyMemtable reports whether err is Badger's failure on an empty
// memtable file. Badger formats the cause into the message (y.Wrapf), so
// errors.Is cannot find it.
func emptyMemtable(err error) bool {
	return errors.Is(err, z.NewFile) || strings.Contains(err.Error(), z.NewFile.Error())
}
