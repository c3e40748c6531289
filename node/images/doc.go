// Package images is the node's library of job images: content/image (an
// image as one DAG in the content store) joined to exec/layers (layers
// unpacked once, on disk, for the sandbox).
//
// A submitter imports the image a declaration names (Import) and signs the
// declaration with the image's CID; the API lists and removes imported
// images (List, Remove). A provider, once the image's DAG is in its store
// (fetched from the submitter, or pulled from a registry with Pull when the
// node may), turns it into an exec.ImageRoot with Prepare: every layer is
// acquired from the layer cache, unpacked only on the first job that needs
// it, and held until the run's release.
//
// The cache's uid shift must be the runner's (exec.RunnerOptions.UIDBase),
// or the files of an image would belong to no one inside the job; Open
// takes both from the same value.
package images
