package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/e31network/e31/testnet/cluster"
	"github.com/e31network/e31/testnet/imagebuild"
)

// demoImage is the sample job's image: the archive the declaration names,
// relative to the demo's folder.
const demoImage = "busybox.tar"

// aptInstall installs Debian packages, saying why first. It fails where
// this is not root or has no apt-get, with the command to run instead.
func aptInstall(ctx context.Context, say func(string, ...any), why string, pkgs ...string) error {
	hint := "apt-get install -y " + strings.Join(pkgs, " ")
	if os.Geteuid() != 0 {
		return fmt.Errorf("%s; as root, run: %s", why, hint)
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return fmt.Errorf("%s: install %s with your package manager", why, strings.Join(pkgs, " "))
	}
	say("%s: installing %s with apt-get", why, strings.Join(pkgs, " "))
	for _, args := range [][]string{{"update", "-qq"}, append([]string{"install", "-y", "-qq"}, pkgs...)} {
		c := exec.CommandContext(ctx, "apt-get", args...)
		c.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := c.CombinedOutput(); err != nil {
			return fmt.Errorf("apt-get %s: %w\n%s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

// buildDemoImage builds the sample job's software, a busybox root with
// every applet in /bin, as the oci-archive dir/busybox.tar. The job's
// script is plain sh, so busybox runs all of it.
func buildDemoImage(ctx context.Context, dir string, say func(string, ...any)) error {
	if missing := imagebuild.Missing(); len(missing) > 0 {
		err := aptInstall(ctx, say, "umoci and busybox-static (to build the sample job's image) are missing", missing...)
		if err != nil {
			return err
		}
	}
	work := filepath.Join(dir, "image")
	if err := os.MkdirAll(work, 0o755); err != nil {
		return err
	}
	b, err := imagebuild.New(ctx, work, "demo")
	if err != nil {
		return err
	}
	if err := b.Layer(ctx, imagebuild.BusyboxRoot()); err != nil {
		return err
	}
	if err := b.Config(ctx, "--config.env", "PATH=/bin"); err != nil {
		return err
	}
	if err := b.Archive(filepath.Join(dir, demoImage)); err != nil {
		return err
	}
	return os.RemoveAll(work)
}

// imageProviders returns why no provider of c can run image jobs, or nil
// when one can: a provider says which in its log once it has started.
func imageProviders(c *cluster.Cluster, providers []int) error {
	var why []string
	for _, i := range providers {
		n := c.Nodes[i]
		b, err := os.ReadFile(filepath.Join(n.Data, "e31d.log"))
		if err != nil {
			return err
		}
		if strings.Contains(string(b), "image jobs run here") {
			return nil
		}
		line := "no word on images in its log"
		for l := range strings.Lines(string(b)) {
			if strings.Contains(l, "image jobs do not run here") {
				line = strings.TrimSpace(l)
			}
		}
		why = append(why, n.Name+": "+line)
	}
	return errors.New(strings.Join(why, "; "))
}

// metric reads one counter or gauge from a node's Prometheus endpoint.
func metric(ctx context.Context, addr, name string) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+" "); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	return 0, fmt.Errorf("%s has no metric %s", addr, name)
}
