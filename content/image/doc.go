// Package image moves a job's software, an OCI image, into and out of the
// content store.
//
// # References
//
// ParseRef reads the transport syntax podman and skopeo users write:
// oci:PATH[:TAG] (a layout directory), oci-archive:PATH[:TAG] (its tar),
// docker-archive:PATH[:NAME] (a docker save tarball),
// docker://REGISTRY/REPO[:TAG][@sha256:DIGEST], or the CID of an image
// already imported. Either archive may be compressed whole with gzip, zstd
// or bzip2 (`docker save IMAGE | gzip`, nix's dockerTools), as docker load
// and skopeo accept; xz is refused with a word on how to decompress it.
//
// # The image as a DAG
//
// Import resolves the reference to one image manifest for linux/<GOARCH>
// (an index with no such manifest is ErrNoPlatform, naming the platforms
// it has) and stores the image as ONE UnixFS directory DAG laid out like an
// OCI image layout holding that image alone:
//
//	oci-layout
//	index.json                the one manifest, with the config's platform
//	blobs/sha256/<hex>        manifest, config, and every layer as stored
//
// The root CID names the image. Because index.json is written here rather
// than copied, the root depends only on the manifest: the same image from a
// layout, its archive or a registry gets the same CID. Each blob is a
// UnixFS file chunked like any input, so an image moves between peers with
// content.Exchange.Fetch of its root, and two images that share a layer
// share that layer's blocks (stored once, fetched once). The DAG itself
// maps digests to CIDs (blobs/sha256/<hex>); there is no separate index.
//
// Every blob streams from its source straight into the store
// (content.Store.ImportTree) and is hashed on the way: bytes that do not
// match their digest or size fail the import with ErrDigestMismatch before
// anything is pinned. Archives are read in place (one pass indexes the
// tar), nothing is extracted to disk; a compressed one is first
// decompressed into a temporary file, unlinked as it is made, since
// reading an image seeks in its archive.
//
// Docker archives are read through their manifest.json. Their layers are
// plain tars, kept as they are; the manifest that names them is written
// here (OCI, media type .tar) with each layer's digest taken from the
// config's diff_ids and checked as it streams in.
//
// Registry images: a tag is resolved to the digest of the image manifest
// for the platform (not of a multi-platform index), and Record.Pinned is
// docker://REGISTRY/REPO@sha256:<that digest>. A provider given that
// reference can Pull it from the registry itself and gets the same CID,
// since the DAG depends only on the manifest. Pull refuses a reference
// without a digest (ErrNotPinned).
//
// # Reading it back
//
// Load reads an image from its DAG, which may have come from another peer,
// and checks it: one manifest, manifest and config hashing to their
// digests, every layer blob present with its size, one diff_id per layer.
// It returns the manifest, the runtime config (Entrypoint, Cmd, Env,
// WorkingDir, User, and the raw config) and the ordered layers with digest,
// diff_id, media type, size and CID. OpenLayer streams a layer blob and
// checks its sha256 as it is read; a mismatch is ErrDigestMismatch at EOF.
// Unpacking layers is the caller's (exec).
//
// # Records
//
// Import pins the root with PinReason(ref) ("image: " + the reference) by
// default. List turns the store's image pins into Records, reading the rest
// from each DAG, and Remove drops an image's pins; GC then frees the blocks
// no other pin holds. There is no second index to keep in step with the
// pins.
package image
