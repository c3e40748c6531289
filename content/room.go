package content

import (
	"errors"
	"fmt"

	blocks "github.com/ipfs/go-block-format"
)

// ErrNoRoom means a write was refused because the disk has no room for it
// beside what its owner keeps free (StoreOptions.Room): the store's own
// records, the ledger's beside it, must never be the writes that find the
// disk full.
var ErrNoRoom = errors.New("content: no room on the disk")

// makeRoom asks StoreOptions.Room whether bs fits. It counts every block,
// held already or not, which errs by at most one batch on the safe side.
func (s *Store) makeRoom(bs []blocks.Block) error {
	if s.room == nil || len(bs) == 0 {
		return nil
	}
	var n int64
	for _, b := range bs {
		n += int64(len(b.RawData()))
	}
	if err := s.room(n); err != nil {
		return fmt.Errorf("%w: %w", ErrNoRoom, err)
	}
	return nil
}
