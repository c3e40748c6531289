package node

import (
	"fmt"
	"log/slog"
	"os"
)

// prepareDataDir makes the data dir, 0700, or makes an existing one 0700:
// it holds the node's key, the API's token, and every job's inputs,
// outputs and logs. A folder made beforehand with the usual 0755 (by
// mkdir, or an installer) would leave them open to every local user, so
// the mode is set at every start, and a change is said in the log.
func prepareDataDir(dir string, log *slog.Logger) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("data dir %s is not a directory", dir)
	}
	if was := st.Mode().Perm(); was != 0o700 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("make data dir %s 0700: %w", dir, err)
		}
		log.Warn("the data dir was open to other users: made it 0700", "dir", dir, "was", fmt.Sprintf("%04o", was))
	}
	return nil
}
