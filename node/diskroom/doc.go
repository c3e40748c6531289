// Package diskroom is the disk a provider lends its jobs, out of its data
// dir's filesystem, and the reserve it keeps for itself.
//
// Each job writes on a disk of its own (exec.MountDisk), a sparse image
// that costs the host only what the job writes, up to the job's
// request.disk; its output and checkpoints are then imported into the
// content store, beside the ledger and the node's records. Nothing of that
// may fill the filesystem: Badger maps its logs and writes them through
// the mapping, and a write into a mapped file the filesystem has no block
// for is SIGBUS, which kills the daemon, not an error it could handle. So
// the room keeps a reserve of free space (Options.Reserve) that only the
// node's own records use, and lends the rest:
//
//   - A job's disk is granted (Room.Hold, when its provider proposes the
//     lease) only while what every granted job may still take stays under
//     the free space less the reserve. A job may still take: what its
//     disk's image may still allocate (exec.DiskCost less the blocks the
//     image has now), its output's import until it is imported (its
//     request.disk and its logs), and its inputs until they are staged
//     (fetched into the store, then laid out as files: twice their
//     declared size). Two proposals racing for the last free GiB take
//     their turns under one lock: the second is refused before it is
//     signed.
//   - The content store asks before every batch it writes (ContentRoom):
//     a fetch, an import or a checkpoint goes ahead only while the free
//     space after it stays above the reserve and what the jobs' disks may
//     still take. A checkpoint that does not fit is left out; the job goes
//     on.
//   - The offer says what the provider can grant now (Offered): the
//     largest request.disk that would fit beside the leases already
//     signed, within Options.MaxJobDisk, rounded down to three significant
//     bits so that a provider's figure changes, and its offer is
//     published, only when the change matters; or, where it can grant
//     nothing, that it lends no disk (market.DiskFull), so that Match gives
//     it nothing and a waiting job says why.
//   - Where a job's disk cannot be bounded (no loop devices, no
//     mkfs.ext4), it lends nothing (market.DiskUnbounded), unless its owner
//     said otherwise (Options.Unbounded).
//
// Watch measures the filesystem every second. A disk that falls under its
// reserve (the owner's own files, or outputs kept for retention) makes the
// offer say it is full until space returns, and asks the provider to give
// up what it keeps only for retention (Options.Short). Last, the room
// keeps a spare file (spareName, 64 MiB or a sixty-fourth of a small
// filesystem) of allocated blocks, which it deletes the moment the
// filesystem has less free than that, and at start on a full disk, so
// that the node's records have room to be written; and makes again once
// the disk has room.
package diskroom
