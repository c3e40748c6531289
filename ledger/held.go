package ledger

import (
	"encoding/binary"
	"fmt"

	"github.com/e31network/e31/market"
)

// A receipt may say what else than GPUs its lease held: the CPUs, the
// memory and the disk (request.disk) the lease's terms and declaration
// gave the job (Receipt.CPUs, MemoryBytes, DiskBytes). A job that asks for
// no GPU holds those all the same, and with them signed, usage counts its
// CPU-hours and GiB-hours where GPU-hours count nothing.
//
// They are signed after everything else, only when one of them is set, so
// that receipts signed before them keep their bytes and signatures: the
// tail before them (GPUModel, the GPUs seen, the relay and CheckpointAt)
// is then written in full, CheckpointAt behind a flag that says whether it
// is set, so that no receipt with them encodes like one without.

// heldSet reports whether r names any of the resources held beside GPUs.
func (r *Receipt) heldSet() bool { return r.CPUs != 0 || r.MemoryBytes != 0 || r.DiskBytes != 0 }

// appendHeldTail appends, for a receipt that names the resources it held,
// what follows GPUModel: the GPUs seen, the relay and CheckpointAt, each
// written even when empty, then the CPUs, memory and disk.
func appendHeldTail(b []byte, r *Receipt) []byte {
	b = binary.AppendUvarint(b, uint64(len(r.GPUsSeen)))
	for _, g := range r.GPUsSeen {
		b = appendString(b, g.UUID)
		b = appendString(b, g.Model)
	}
	b = appendString(b, string(r.Relay))
	b = appendBool(b, !r.CheckpointAt.IsZero())
	if !r.CheckpointAt.IsZero() {
		b = binary.BigEndian.AppendUint64(b, uint64(r.CheckpointAt.UnixMilli()))
	}
	b = binary.BigEndian.AppendUint64(b, uint64(int64(r.CPUs)))
	b = binary.BigEndian.AppendUint64(b, r.MemoryBytes)
	return binary.BigEndian.AppendUint64(b, r.DiskBytes)
}

// validateHeld checks the resources a receipt says its lease held against
// what any declaration may ask for.
func validateHeld(r *Receipt) error {
	switch {
	case r.CPUs < 0 || r.CPUs > market.MaxCPUs:
		return fmt.Errorf("cpus: %d, want 0 to %d", r.CPUs, market.MaxCPUs)
	case r.MemoryBytes > market.MaxMemory:
		return fmt.Errorf("memory_bytes: %d, want at most %d", r.MemoryBytes, uint64(market.MaxMemory))
	case r.DiskBytes > market.MaxDisk:
		return fmt.Errorf("disk_bytes: %d, want at most %d", r.DiskBytes, uint64(market.MaxDisk))
	}
	return nil
}

// checkHeldTerms checks the CPUs and memory a receipt says its lease held
// against its terms, where it says any: a provider cannot bill for more
// than both parties signed. The terms say nothing of the disk, which the
// submitter checks against its declaration.
func checkHeldTerms(r *Receipt, t LeaseTerms) error {
	switch {
	case r.CPUs != 0 && r.CPUs != t.CPUs:
		return fmt.Errorf("%w: lease evidence holds %d CPUs, the receipt %d", ErrInvalidReceipt, t.CPUs, r.CPUs)
	case r.MemoryBytes != 0 && r.MemoryBytes != t.MemoryBytes:
		return fmt.Errorf("%w: lease evidence holds %d bytes of memory, the receipt %d", ErrInvalidReceipt, t.MemoryBytes, r.MemoryBytes)
	}
	return nil
}

// gib is a byte count in GiB, for GiB-hours.
func gib(b uint64) float64 { return float64(b) / (1 << 30) }
