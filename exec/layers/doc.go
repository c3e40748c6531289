// Package layers unpacks OCI image layers on a provider, safely, into a
// bounded cache shared by every image, in the form overlayfs stacks into a
// job's read-only root.
//
// # Unpacking one layer
//
// [Unpack] reads one layer blob (a tar, plain or compressed with gzip or
// zstd; the first bytes decide, and a media type, when given, must agree)
// into an empty directory. Layers are unpacked one by one, never flattened:
// go-containerregistry's mutate.Extract flattens and mishandles hard links
// (its issues #977 and #2002), and a per-layer directory is what overlayfs
// wants anyway.
//
// The tar is hostile until proven otherwise. Every write goes through an
// [os.Root] opened on the layer's directory, so the kernel refuses any
// path that resolves outside it; on top of that, names are refused before
// any write when they are absolute, contain "..", or pass through a
// symlink or a non-directory of the layer (the unpacker remembers what it
// wrote, so this costs no system call). Symlinks are stored as written and
// never followed: an absolute target means the job's root, not the host's.
// A hard link may only name a file or symlink this layer has already
// unpacked. Device nodes and fifos are skipped and counted; PAX extended
// attributes are not applied (a layer could otherwise set overlay's own
// trusted.overlay.* attributes and redirect lookups). A cap on the bytes
// written and on the number of entries stops a tar bomb; bytes of padding
// after the tar's end are bounded too. An error wraps one of the sentinel
// errors (ErrUnsafePath, ErrBadLink, ErrTooLarge, ErrBadOwner,
// ErrUnsupported) inside an [EntryError] that names the offending entry.
// Bytes that are not a layer at all (not a tar, a tar cut short, a corrupt
// gzip or zstd stream) are ErrMalformed; an error of the reader the blob
// comes from is passed on as it is, so that a caller can tell what the
// layer did from what went wrong around it.
//
// Whiteouts are converted as containerd's and moby's overlay snapshotters
// do: ".wh.NAME" becomes a character device 0/0 named NAME and
// ".wh..wh..opq" sets trusted.overlay.opaque=y on its directory. That is
// why unpacking needs root (CAP_MKNOD, CAP_SYS_ADMIN for trusted xattrs,
// CAP_CHOWN), which the provider daemon has.
//
// Ownership is shifted for the job's user namespace: with UIDBase and
// GIDBase set, container ids 0..65535 become Base..Base+65535 on the host
// and an id outside that range is refused. Directories the tar implies
// but omits, and the layer root itself, belong to the container's root.
// Modes keep setuid, setgid and sticky bits (no_new_privs makes setuid
// inert in the job); mtimes are kept, directories' last.
//
// # The cache
//
// [Cache] keeps one entry per layer digest (the sha256 of the compressed
// blob, as the manifest names it), so two images sharing a base layer
// store it once:
//
//	DIR/sha256/<hex>/rootfs      the layer: an overlay lowerdir
//	DIR/sha256/<hex>/meta.json   completion record; its mtime is the last use
//	DIR/tmp/                     unpacks in progress and removals
//
// [Cache.Acquire] returns the rootfs directory and a release. A miss
// unpacks the blob from the caller's open func into tmp/, checking its
// sha256 on the way; only after the tree is flushed (syncfs) and
// meta.json is written and fsynced is it renamed into sha256/, so a crash
// leaves either a complete entry or debris that [OpenCache] removes.
// Concurrent Acquires of one digest share one unpack.
//
// meta.json records a digest of the tree's metadata (paths, types, modes,
// owners, sizes, mtimes, link targets, opaque marks). When a layer that
// no one is using is acquired, the tree is walked and compared with it; a
// deleted, added, resized or rewritten file makes the layer count as
// damaged, and it is removed and unpacked again from open. Contents are
// not hashed: that would read the whole layer on every job start. A layer
// already in use is shared as is; it was checked when first acquired.
//
// The cache is bounded by CacheOptions.MaxBytes (disk blocks, counted
// once per inode). After an unpack or a release it evicts the least
// recently used layers that are not in use until it is under the cap. A
// layer in use is never evicted: if what is in use alone exceeds the cap,
// the cache stays over it, logs a warning and reports OverCap in
// [Cache.Stats]. Order of use survives a restart through meta.json's
// mtime.
//
// # Use from the daemon
//
// Open one Cache at start (DATA/layers, --image-cache-size, the user
// namespace's base ids), Acquire each layer of a job's image, bottom to
// top or concurrently, and give the sandbox the directories top layer
// first as overlay's lowerdir ("top:…:bottom", read-only). Call every
// release after the overlay is unmounted. The overlay test in this package
// mounts real overlayfs over unpacked layers and shows the format right.
package layers
