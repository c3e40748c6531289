// Package imagebuild builds small, real OCI images for tests, the demo and
// benchmarks: umoci writes the layout and its layers, and Debian's
// busybox-static (one static binary standing in for a whole userland)
// fills the root, so no registry and no container engine is needed.
//
// A Builder starts an empty image in an OCI layout directory; every Layer
// call unpacks the image as it stands, lets the caller edit the root, and
// repacks the difference as one new gzip layer, so deletions become
// whiteouts and new hard links become tar links exactly as umoci writes
// them. BusyboxRoot is the usual first edit: /bin/busybox and a symlink
// per applet. Archive writes the layout as the tar podman calls an
// oci-archive.
//
//	b, err := imagebuild.New(ctx, dir, "v1")
//	err = b.Layer(ctx, imagebuild.BusyboxRoot())
//	err = b.Config(ctx, "--config.env", "PATH=/bin")
//	// b.Ref() is "oci:DIR/layout:v1"
//
// Missing reports the programs this needs (umoci, busybox) that are not
// installed; Debian packages them as umoci and busybox-static.
package imagebuild
