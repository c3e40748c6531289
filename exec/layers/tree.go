package layers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// treeSummary is what a walk of an unpacked layer finds: a digest of its
// metadata, to notice later damage, and the disk space it takes.
type treeSummary struct {
	Digest    string
	DiskBytes int64
}

// summarize walks dir without following symlinks and hashes, in lexical
// order, each entry's path, type and permission bits, owner, size, mtime,
// link target, device number and opaque mark. A deleted, added, resized,
// rewritten (mtime), re-owned or chmodded entry changes the digest; file
// contents are not read, which keeps the check cheap enough to run on
// every Acquire. DiskBytes counts allocated blocks, each inode once.
func summarize(ctx context.Context, dir string) (treeSummary, error) {
	h := sha256.New()
	seen := map[uint64]bool{}
	var disk int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok {
			return fmt.Errorf("%s: no stat data", p)
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		var size int64
		var target string
		opaque := false
		switch {
		case info.Mode().IsRegular():
			size = info.Size()
		case info.Mode()&fs.ModeSymlink != 0:
			if target, err = os.Readlink(p); err != nil {
				return err
			}
		case info.IsDir():
			if opaque, err = isOpaque(p); err != nil {
				return err
			}
		}
		if st.Nlink <= 1 || !seen[st.Ino] {
			seen[st.Ino] = true
			disk += st.Blocks * 512
		}
		fmt.Fprintf(h, "%q %o %d %d %d %d %q %d %t\n", rel, st.Mode, st.Uid, st.Gid, size,
			st.Mtim.Nano(), target, st.Rdev, opaque)
		return nil
	})
	if err != nil {
		return treeSummary{}, err
	}
	return treeSummary{Digest: "sha256:" + hex.EncodeToString(h.Sum(nil)), DiskBytes: disk}, nil
}

func isOpaque(dir string) (bool, error) {
	buf := make([]byte, 8)
	n, err := unix.Lgetxattr(dir, opaqueXattr, buf)
	if errors.Is(err, unix.ENODATA) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read xattr of %s: %w", dir, err)
	}
	return string(buf[:n]) == "y", nil
}
