package main

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/e31network/e31/market"
)

// unstagedPaths finds the command's arguments that name a file or folder
// here, relative to base (the current folder, or the declaration's), when
// the job will not find it there: a job without an image starts in its
// work.workdir, else in its output folder, on the provider, and sees of
// this machine only what its data mounts. Each finding is a line for the
// user saying where the job would see the path, or how to stage it. An
// image may hold such a path at its WorkingDir, so jobs with one are left
// alone; so is an argument that names nothing here, and one the job finds
// where it starts.
func unstagedPaths(d market.Declaration, base string) []string {
	if d.Work.Image != "" {
		return nil
	}
	start, startsIn := d.Output.Path, "its empty output folder ("+d.Output.Path+")"
	if d.Work.Workdir != "" {
		start, startsIn = d.Work.Workdir, d.Work.Workdir
	}
	var notes []string
	for i, arg := range d.Work.Command {
		if arg == "" || strings.HasPrefix(arg, "-") || filepath.IsAbs(arg) || strings.ContainsAny(arg, " \t\n=") {
			continue
		}
		if i == 0 && !strings.Contains(arg, "/") {
			continue // a program found on the PATH
		}
		local := filepath.Join(base, arg)
		fi, err := os.Stat(local)
		if err != nil {
			continue
		}
		kind := "a file"
		if fi.IsDir() {
			kind = "a folder"
		}
		clean := filepath.ToSlash(filepath.Clean(arg))
		if at, ok := mountedAt(d.Data, local); ok {
			if at == path.Join(start, clean) {
				continue
			}
			note := fmt.Sprintf("%q is %s here that the job sees at %s, not in the folder it starts in (%s): name %s in the command", arg, kind, at, start, at)
			if dir, ok := strings.CutSuffix(at, "/"+clean); ok && d.Work.Workdir == "" {
				note += fmt.Sprintf(", or start it there with --workdir %s (work.workdir in a declaration)", dir)
			}
			notes = append(notes, note)
			continue
		}
		notes = append(notes, fmt.Sprintf("%q is %s here, but the job starts in %s on the provider and sees only what its data mounts: stage it with --input ./%s:/code/%s (in a declaration, data: [{source: ./%s, mount: /code/%s}]) and name /code/%s in the command",
			arg, kind, startsIn, clean, clean, clean, clean, clean))
	}
	return notes
}

// writeWords are parts of a flag's or variable's name that say the job
// writes where it names (--checkpoint-dir, --output_dir, SAVE_PATH).
var writeWords = []string{"checkpoint", "checkpoints", "ckpt", "ckpts", "save", "output", "outputs", "out",
	"results", "logdir", "logging", "snapshot", "snapshots"}

// readWords are parts of a name that say the job reads what it names
// (--resume_from_checkpoint, --load-ckpt), which a read-only path serves.
var readWords = []string{"resume", "load", "from", "init", "pretrained", "input", "in", "data", "read"}

// readOnlyWrites finds the paths the command or environment tell a job to
// write to (by the flag's or variable's name) that are read-only in its
// sandbox: a job without an image may write only under its output and
// checkpoint paths, /tmp and /dev/shm, and one that writes its
// checkpoints elsewhere (--checkpoint-dir /ckpt) dies on the provider.
// Each finding is a line for the user saying what to declare. Jobs with an
// image, whose root is writable, are left alone; so is a path under a data
// input, which the job may mean to read.
func readOnlyWrites(d market.Declaration) []string {
	if d.Work.Image != "" {
		return nil
	}
	writable := []string{d.Output.Path}
	if c := d.Output.Checkpoints; c != nil && c.Path != "" {
		writable = append(writable, c.Path)
	}
	writable = append(writable, "/tmp", "/dev/shm")
	var notes []string
	check := func(what, name, value string) {
		if !path.IsAbs(value) || !writesTo(name) {
			return
		}
		p := path.Clean(value)
		for _, w := range writable {
			if under(p, w) {
				return
			}
		}
		for _, in := range d.Data {
			if under(p, in.Mount) {
				return
			}
		}
		notes = append(notes, fmt.Sprintf("%s: the job would write to %s, which is read-only in its sandbox (a job without an image may write only under %s): "+
			"declare it as the job's checkpoint path with --checkpoint-path %s --checkpoint-every 10m (output.checkpoints in a declaration), or write under %s",
			what, p, strings.Join(writable, ", "), p, d.Output.Path))
	}
	cmd := d.Work.Command
	for i, arg := range cmd {
		if !strings.HasPrefix(arg, "-") {
			continue
		}
		if name, value, ok := strings.Cut(arg, "="); ok {
			check(arg, name, value)
		} else if i+1 < len(cmd) {
			check(arg+" "+cmd[i+1], arg, cmd[i+1])
		}
	}
	names := make([]string, 0, len(d.Work.Env))
	for name := range d.Work.Env {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		check("work.env "+name+"="+d.Work.Env[name], name, d.Work.Env[name])
	}
	return notes
}

// writesTo reports whether a flag's or variable's name says the job
// writes where it points.
func writesTo(name string) bool {
	words := strings.FieldsFunc(strings.ToLower(name), func(r rune) bool { return r == '-' || r == '_' || r == '.' })
	write := false
	for _, w := range words {
		if slices.Contains(readWords, w) {
			return false
		}
		if slices.Contains(writeWords, w) {
			write = true
		}
	}
	return write
}

// under reports whether the clean absolute path p is dir or inside it.
func under(p, dir string) bool {
	dir = path.Clean(dir)
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

// mountedAt is where the job sees the local path p, when a data source
// holds it.
func mountedAt(data []market.Input, p string) (string, bool) {
	for _, in := range data {
		if !filepath.IsAbs(in.Source) {
			continue // a CID
		}
		rel, err := filepath.Rel(in.Source, p)
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			continue
		}
		return path.Join(in.Mount, filepath.ToSlash(rel)), true
	}
	return "", false
}

// secretWords are parts of an environment variable's name that mark it as
// holding a credential (HF_TOKEN, WANDB_API_KEY, AWS_SECRET_ACCESS_KEY).
var secretWords = []string{"TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "CREDENTIALS", "APIKEY", "KEY", "AUTH"}

// secretValuePrefixes begin well-known credentials, whatever the
// variable's name: Hugging Face, OpenAI and Stripe, GitHub, GitLab, Slack,
// AWS access key IDs, Google API keys and OAuth tokens, npm, PyPI.
var secretValuePrefixes = []string{"hf_", "sk-", "sk_live_", "rk_live_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_",
	"glpat-", "xoxb-", "xoxp-", "xapp-", "AKIA", "ASIA", "AIza", "ya29.", "npm_", "pypi-"}

// credentialNotes finds the job's environment variables, and arguments of
// its command, that look like credentials: a declaration, env and command
// included, is signed and broadcast to every peer of the network in the
// clear, while a secret's value goes only to the provider running the job.
// Each finding is a warning for the user saying so and how to pass the
// value as a secret instead, without repeating the value.
func credentialNotes(d market.Declaration) []string {
	var names []string
	for name, value := range d.Work.Env {
		if looksSecret(name, value) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	var notes []string
	for _, name := range names {
		notes = append(notes, credentialNote("work.env "+name, name))
	}
	for i, arg := range d.Work.Command {
		_, value, _ := strings.Cut(arg, "=")
		if looksSecret("", arg) || looksSecret("", value) {
			notes = append(notes, credentialNote(fmt.Sprintf("argument %d of the command", i), ""))
		}
	}
	return notes
}

// credentialNote is the warning on what, which looks like a credential:
// why it should not be in a declaration, and how to pass it as the secret
// name instead (any name, when name cannot be one).
func credentialNote(what, name string) string {
	how := "--secret NAME, and have the job read $NAME or /run/secrets/NAME"
	if market.ValidSecretName(name) {
		how = "--secret " + name + " in place of --env, or secrets: [" + name + "] in place of work.env; the job reads $" + name + " as before"
	}
	return fmt.Sprintf("%s looks like a credential, and a declaration is broadcast to every peer of the network in the clear: "+
		"pass it as a secret instead, which only the provider running the job sees (%s)", what, how)
}

// looksSecret reports whether an environment variable looks like it holds
// a credential, by the words of its name, its value's prefix, or its
// value's shape: a long run of hex digits, or of base64 mixing upper and
// lower case and digits.
func looksSecret(name, value string) bool {
	for _, p := range secretValuePrefixes {
		if strings.HasPrefix(value, p) && len(value) > len(p)+8 {
			return true
		}
	}
	if longHex(value) || longBase64(value) {
		return true
	}
	for _, w := range strings.FieldsFunc(strings.ToUpper(name), func(r rune) bool { return r == '_' || r == '-' || r == '.' }) {
		if slices.Contains(secretWords, w) {
			return true
		}
	}
	return false
}

// longHex reports whether v is 32 hex digits or more, of one case, with
// both digits and letters: an API key (W&B's are 40), not a number.
func longHex(v string) bool {
	if len(v) < 32 {
		return false
	}
	lower, upper, digit := false, false, false
	for _, c := range v {
		switch {
		case c >= '0' && c <= '9':
			digit = true
		case c >= 'a' && c <= 'f':
			lower = true
		case c >= 'A' && c <= 'F':
			upper = true
		default:
			return false
		}
	}
	return digit && lower != upper
}

// longBase64 reports whether v is 32 characters or more of base64 (either
// alphabet) with upper and lower case letters and digits, and no '/': a
// token, not a path or a word.
func longBase64(v string) bool {
	if len(v) < 32 {
		return false
	}
	lower, upper, digit := false, false, false
	for _, c := range strings.TrimRight(v, "=") {
		switch {
		case c >= '0' && c <= '9':
			digit = true
		case c >= 'a' && c <= 'z':
			lower = true
		case c >= 'A' && c <= 'Z':
			upper = true
		case c == '+' || c == '-' || c == '_':
		default:
			return false
		}
	}
	return lower && upper && digit
}
