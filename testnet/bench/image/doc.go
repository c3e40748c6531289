// Package image measures the images feature, `go run ./testnet
// image-bench`, each figure beside a baseline taken in the same run on the
// same files:
//
//   - a. importing an image of gzip layers into a content store, against
//     the system's sha256sum of its blobs;
//   - b. a cold start on a provider: fetching the image's DAG from another
//     store over the content exchange (two libp2p hosts on 127.0.0.1),
//     then unpacking every layer into an empty layer cache, against tar
//     -xzf of the same layer files;
//   - c. a warm start: a job's start (/bin/true in a busybox image, every
//     layer cached) against the same job on the host's root, with runc;
//   - d. disk use of two images sharing a base: the store's and the layer
//     cache's, against the sum of the two images' sizes;
//   - e. resuming from a checkpoint: exporting it from the store into the
//     job's checkpoint folder, against an overlay with an exported copy as
//     its read-only lower layer (mount and first writes).
//
// Layer files are half random, half text (layout.go), so that they
// compress as binaries do. Files are read from the page cache where they
// were just written, so the load average is reported with the figures.
// Figure c needs root, runc, umoci and busybox-static, and says why where
// it is skipped.
package image
