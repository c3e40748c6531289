package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/ipfs/go-cid"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
)

type submitOptions struct {
	json   bool
	wait   bool
	force  bool // submit though the job will not find a file its command names
	labels []string
	outDir string
	file   string
	// The declaration from flags, when no FILE is given.
	name        string
	gpus        int
	gpuModel    string
	gpuMemory   string
	image       string
	cpus        int
	memory      string
	disk        string
	limit       string
	inputs      []string
	outputPath  string
	env         []string
	workdir     string
	ckptPath    string
	ckptEvery   string
	resume      string
	maxResumes  int
	retries     int
	maxPrice    string
	nodes       int
	array       string
	values      string
	valuesFile  string
	maxFailures int
	after       []string
	afterAny    []string
	pollEvery   time.Duration
	waitTimeout time.Duration
	retryFor    time.Duration

	// secrets are --secret NAME[=env:VAR|file:PATH] (secrets.go).
	secrets []string
	// verify are --replicas, --spot, --min-record, --compare-path.
	check   checkOptions
	flagSet *pflag.FlagSet
}

func newSubmitCommand(g *globalOptions) *cobra.Command {
	var o submitOptions
	cmd := &cobra.Command{
		Use:   "submit FILE | submit -f FILE | submit [--gpus N --limit D --input SRC:MOUNT ...] -- CMD... | submit --image REF [flags]",
		Short: "Submit a job: a declaration file, or flags and a command",
		Long: `submit checks a job's declaration here, before anything is broadcast, imports
its local inputs into the daemon's store, signs it and broadcasts it. The job
waits, unmetered, until a provider can hold what it asks for.

With FILE (or -f FILE), the declaration is read from a YAML (or JSON) file;
relative data sources are taken from the file's folder. Without FILE, flags
build one around the command given after --; with --image and no command, the
image's own Entrypoint and Cmd run. The command runs with no shell: a $VAR in
it is passed as written, and submit warns of it (use sh -c '...' to expand it).

--array, --values and --values-file make the command an array of tasks, each
with $E31_TASK_INDEX (its index), $E31_TASK_COUNT (how many tasks) and, with
values, $E31_TASK_VALUE; --array 7,40,73 runs only those indices, keeping
them, and --max-failures N stops the array at its Nth failed task.

With --wait, submit follows the job through its five steps, writes the output
to -o DIR (default ./<job>-out) and ends with one line: the outcome, the run
time, the GPU-hours and the output's CID (with --json, the job and its final
receipt); it exits non-zero unless the job completed. A request no offer in
view could ever hold (a GPU model no one offers, more GPUs or memory than any
offer has) is accepted with a warning that says why, since the network may
grow; --wait then does not follow it but ends with that reason and exit
status 7. e31 wait follows jobs already submitted, several at once.`,
		Example: `  e31 submit job.yaml --wait
  e31 submit --gpus 1 --limit 1h --input ./data:/data --input ./train.py:/code/train.py -- python3 /code/train.py
  e31 submit --gpus 1 --limit 1h --input .:/code --workdir /code -- python3 train.py
  e31 submit --image docker-archive:./img.tar.gz --limit 2h -- python3 /app/train.py
  e31 submit --secret HF_TOKEN --gpus 1 --limit 1h --input ./train.py:/code/train.py -- python3 /code/train.py
  e31 submit --gpus 2 --limit 10m --json -- sh -c 'nvidia-smi > /out/smi.txt'
  e31 submit --array 0-499%50 --max-failures 5 --gpus 1 --limit 30m --input .:/code -- sh -c 'python3 /code/sim.py --seed "$E31_TASK_INDEX"'
  e31 submit --values-file lrs.txt --array 7,40,73 --gpus 1 --limit 1h --input .:/code -- sh -c 'python3 /code/train.py --lr "$E31_TASK_VALUE"'`,
		RunE: func(cmd *cobra.Command, args []string) error {
			args, err := fileArg(o.file, args, cmd.ArgsLenAtDash())
			if err != nil {
				return err
			}
			if cmd.ArgsLenAtDash() < 0 && len(args) == 1 {
				if err := noFlagsFormFlags(cmd.Flags()); err != nil {
					return err
				}
			}
			return runSubmit(cmd.Context(), o, g, args, cmd.ArgsLenAtDash())
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.json, "json", false, "print the job as JSON (with --wait, the final status)")
	f.StringVarP(&o.file, "file", "f", "", "the declaration FILE, as a flag (as kubectl and docker compose take theirs)")
	f.BoolVar(&o.wait, "wait", false, "follow the job to its end, fetch its output and print how it ended")
	f.StringArrayVar(&o.labels, "label", nil, "KEY=VALUE, a label of this node's own to select the job by (e31 list --label); repeatable, over a declaration's labels")
	f.StringArrayVar(&o.secrets, "secret", nil, "NAME[=env:VAR|file:PATH]: a value only the job's provider sees, as $NAME and /run/secrets/NAME (an API token): read here, from your variable NAME by default; repeatable, over a declaration's secrets")
	f.BoolVar(&o.force, "force", false, "submit even when the job will not find a file its command names, or would write where its sandbox is read-only (refused otherwise)")
	f.StringVarP(&o.outDir, "output", "o", "", "with --wait: where to write the output (default ./<job>-out); of an array, each task's at DIR/<index>/out, as e31 get writes them")
	f.StringVar(&o.name, "name", "", "job name (flags form; default: the script a launcher such as python3 runs, else the program)")
	f.IntVar(&o.gpus, "gpus", 1, "GPUs to hold (flags form)")
	f.StringVar(&o.gpuModel, "gpu-model", "", "GPU model the job needs, e.g. H100 (flags form)")
	f.StringVar(&o.gpuMemory, "gpu-memory", "", "memory each GPU must have, e.g. 40GiB (flags form)")
	f.StringVar(&o.image, "image", "", "the job's software as an OCI image: oci-archive:PATH, docker-archive:PATH, oci:DIR[:TAG], docker://REPO:TAG or a CID (flags form; default the provider's root; see e31 image --help)")
	f.IntVar(&o.cpus, "cpus", 0, "CPUs (flags form; default 1)")
	f.StringVar(&o.memory, "memory", "", "memory, e.g. 8GiB (flags form; default 1GiB)")
	f.StringVar(&o.disk, "disk", "", "most the job may write in all (output, checkpoints, /tmp), e.g. 50GiB (flags form; default 10GiB)")
	f.StringVar(&o.limit, "limit", "", "wall-clock limit after which the job is stopped, e.g. 8h (flags form; required)")
	f.StringArrayVar(&o.inputs, "input", nil, "SRC:MOUNT, a local path, a CID, or job:JOB/out[/PATH] (an earlier job's output), staged read-only at MOUNT; repeatable (flags form)")
	f.StringVar(&o.outputPath, "output-path", "/out", "path inside the job whose content comes back (flags form)")
	f.StringArrayVar(&o.env, "env", nil, "NAME=VALUE for the job; repeatable (flags form)")
	f.StringVarP(&o.workdir, "workdir", "w", "", "folder inside the job the command starts in, made if missing, as docker run -w (flags form; default the image's WorkingDir, else the output folder)")
	f.StringVar(&o.ckptPath, "checkpoint-path", "", "path inside the job for checkpoints (flags form)")
	f.StringVar(&o.ckptEvery, "checkpoint-every", "10m", "how often checkpoints are taken (flags form)")
	f.StringVar(&o.resume, "resume", "", "auto: resubmit the job from its last checkpoint when a run is lost or stopped by no fault of its own (flags form; needs --checkpoint-path)")
	f.IntVar(&o.maxResumes, "max-resumes", market.DefaultMaxResumes, "with --resume auto: how many times at most (flags form)")
	f.StringArrayVar(&o.after, "after", nil, "JOB: hold this job on this node until JOB has completed (it ends failed if JOB does not); repeatable; --input job:JOB/out:/in takes JOB's output (flags form; a declaration's after)")
	f.StringArrayVar(&o.afterAny, "after-any", nil, "JOB: hold this job until JOB has ended, however it ends; repeatable (flags form; a declaration's after_any)")
	f.IntVar(&o.nodes, "nodes", 0, "run the job as a gang of N parts on N providers at once, --gpus, --cpus and --memory each, with a private network between them (E31_NODE_RANK, MASTER_ADDR, ...; flags form; request.nodes)")
	f.StringVar(&o.maxPrice, "max-price", "", "the most the job pays per GPU-hour, in the network's currency, e.g. 2.40: it runs only on providers whose price is at or under it (flags form; request.max_price; default: no cap)")
	f.IntVar(&o.retries, "retries", 0, "run the job again up to N times when it fails by its own fault (exit status, memory), from its last checkpoint if it took one (flags form; request.retries)")
	f.StringVar(&o.array, "array", "", "run the command as an array of tasks: N (tasks 0 to N-1), a range 0-LAST, or indices and ranges 7,40,73 or 0-9,40,73 (each task keeps its index), any with %P to run at most P at once (0-9999%200); each task sees E31_TASK_INDEX, its index, and E31_TASK_COUNT, how many tasks (flags form; a declaration's array)")
	f.StringVar(&o.values, "values", "", "A,B,C: run the command once per value, which its task sees as $E31_TASK_VALUE (no value may hold a comma: use --values-file); with --array 7,40 only those indices run, each with the value of its index (flags form; array.values)")
	f.StringVar(&o.valuesFile, "values-file", "", "FILE: as --values, one value a line (flags form; array.values_file)")
	f.IntVar(&o.maxFailures, "max-failures", 0, "stop an array at its Nth failed task: the queued tasks are withdrawn (nothing owed), the running ones end as they will, and the array ends failed (flags form; array.max_failures)")
	o.check.flags(f)
	o.flagSet = f
	f.DurationVar(&o.pollEvery, "poll", defaultPoll, "with --wait: how often to ask a daemon that cannot answer on each change of the job (an older version)")
	f.DurationVar(&o.waitTimeout, "wait-timeout", 0, "with --wait: give up following after this long (0: never)")
	f.DurationVar(&o.retryFor, "retry-for", api.DefaultReconnectFor, "with --wait: "+retryForUsage)
	return cmd
}

// fileArg gives the arguments with -f FILE put where a FILE argument goes;
// FILE given both ways, or beside -- CMD, is refused.
func fileArg(file string, args []string, dash int) ([]string, error) {
	switch {
	case file == "":
		return args, nil
	case dash >= 0:
		return nil, fmt.Errorf("-f %s and -- %s: give either FILE or flags and -- CMD, not both", file, strings.Join(args[dash:], " "))
	case len(args) > 0:
		return nil, fmt.Errorf("-f %s and %s: give one declaration FILE", file, strings.Join(args, " "))
	}
	return []string{file}, nil
}

// flagsFormFlags are the flags that build a declaration around a command;
// with a declaration FILE they would be ignored.
func flagsFormFlags() []string {
	return []string{"name", "gpus", "gpu-model", "gpu-memory", "image", "cpus", "memory", "disk", "limit",
		"input", "output-path", "env", "workdir", "checkpoint-path", "checkpoint-every", "resume", "max-resumes", "retries", "max-price", "after", "after-any", "array", "values", "values-file", "max-failures", "nodes"}
}

// noFlagsFormFlags refuses, naming them, flags of the flags form given with
// a declaration FILE: the file says all, and a flag silently ignored would
// run a job other than the one asked for.
func noFlagsFormFlags(f *pflag.FlagSet) error {
	var set []string
	for _, name := range flagsFormFlags() {
		if f.Changed(name) {
			set = append(set, "--"+name)
		}
	}
	if len(set) > 0 {
		return fmt.Errorf("%s: only for a job built from flags and -- CMD; with a declaration FILE, set it in the file", strings.Join(set, ", "))
	}
	return nil
}

// declarationFromFile reads and checks a declaration file; relative local
// sources are resolved against the file's folder.
func declarationFromFile(path string) (market.Declaration, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return market.Declaration{}, err
	}
	if len(data) > market.MaxDeclarationBytes {
		return market.Declaration{}, fmt.Errorf("%s: %d bytes, over the %d-byte limit of a declaration", path, len(data), market.MaxDeclarationBytes)
	}
	base, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return market.Declaration{}, err
	}
	d, err := market.DecodeDeclaration(data)
	if err != nil {
		var loose struct {
			Work struct {
				Image string `yaml:"image"`
			} `yaml:"work"`
		}
		if yaml.Unmarshal(data, &loose) == nil {
			if h := refHint(loose.Work.Image, base); h != "" {
				err = fmt.Errorf("%w\n(work.image: %s)", err, h)
			}
		}
		return market.Declaration{}, fmt.Errorf("%s is not a valid declaration:\n%w", path, err)
	}
	return d, absSources(&d, base)
}

func absSources(d *market.Declaration, base string) error {
	for i := range d.Data {
		src := d.Data[i].Source
		if _, err := cid.Decode(src); err == nil {
			continue
		}
		if _, _, inDAG := market.SplitCIDPath(src); inDAG {
			continue // resolved by the daemon, in its store
		}
		if strings.HasPrefix(src, market.JobSourcePrefix) {
			continue // an earlier job's output, resolved by the daemon
		}
		if !filepath.IsAbs(src) {
			d.Data[i].Source = filepath.Join(base, src)
		}
	}
	if a := d.Array; a != nil && a.ValuesFile != "" && !filepath.IsAbs(a.ValuesFile) {
		a.ValuesFile = filepath.Join(base, a.ValuesFile)
	}
	absSecretFiles(d, base)
	if d.Work.Image != "" {
		ref, err := absImageRef(d.Work.Image, base)
		if err != nil {
			return fmt.Errorf("work.image: %w", err)
		}
		d.Work.Image = ref
	}
	return market.CheckSources(*d, func(p string) (bool, error) {
		_, err := os.Stat(p)
		if errors.Is(err, os.ErrNotExist) {
			return false, nil
		}
		return err == nil, err
	})
}

// cleanJobPath tidies a path inside the job typed on the command line
// (/data/ is /data): a declaration file must hold clean paths, as it is
// signed as written, but a flag can be read as meant. A relative path is
// left for validation to refuse.
func cleanJobPath(p string) string {
	if !path.IsAbs(p) {
		return p
	}
	return path.Clean(p)
}

// imageName is a job name from an image reference: the last element of
// its path or repository, without a tag or digest.
func imageName(ref string) string {
	if _, rest, ok := strings.Cut(ref, "://"); ok {
		ref = rest
	} else if _, rest, ok := strings.Cut(ref, ":"); ok {
		ref = rest
	}
	ref, _, _ = strings.Cut(ref, "@")
	base := path.Base(strings.TrimSuffix(ref, "/"))
	if i := strings.Index(base, ":"); i > 0 {
		base = base[:i]
	}
	for _, ext := range []string{".gz", ".zst", ".bz2", ".tar"} {
		base = strings.TrimSuffix(base, ext)
	}
	if base == "" || base == "." || base == "/" {
		return "image"
	}
	return base
}

// declarationFromFlags builds a declaration around a command, or around
// an image's own Entrypoint and Cmd when command is empty.
func declarationFromFlags(o submitOptions, command []string) (market.Declaration, error) {
	if o.limit == "" {
		return market.Declaration{}, errors.New("--limit is required: how long may the job hold its GPUs? (e.g. --limit 1h)")
	}
	limit, err := market.ParseDuration(o.limit)
	if err != nil {
		return market.Declaration{}, fmt.Errorf("--limit: %w", err)
	}
	var inputs []market.Input
	for _, in := range o.inputs {
		i := strings.LastIndex(in, ":")
		if i <= 0 || i == len(in)-1 {
			return market.Declaration{}, fmt.Errorf("--input %q: want SRC:MOUNT, e.g. ./data:/data", in)
		}
		inputs = append(inputs, market.Input{Source: in[:i], Mount: cleanJobPath(in[i+1:])})
	}
	name := o.name
	switch {
	case name != "":
	case len(command) > 0:
		name = commandName(command)
	default:
		name = imageName(o.image)
	}
	d := market.NewDeclaration(name, command, o.gpus, limit, inputs)
	d.Request.GPUModel = o.gpuModel
	if o.gpuMemory != "" {
		m, err := market.ParseSize(o.gpuMemory)
		if err != nil {
			return market.Declaration{}, fmt.Errorf("--gpu-memory: %w", err)
		}
		d.Request.GPUMemory = m
	}
	if h := refHint(o.image, "."); h != "" {
		return market.Declaration{}, fmt.Errorf("--image %q: %s", o.image, h)
	}
	d.Work.Image = o.image
	if o.cpus > 0 {
		d.Request.CPUs = o.cpus
	}
	if o.memory != "" {
		m, err := market.ParseSize(o.memory)
		if err != nil {
			return market.Declaration{}, fmt.Errorf("--memory: %w", err)
		}
		d.Request.Memory = m
	}
	if o.disk != "" {
		m, err := market.ParseSize(o.disk)
		if err != nil {
			return market.Declaration{}, fmt.Errorf("--disk: %w", err)
		}
		d.Request.Disk = m
	}
	d.Request.Retries = o.retries
	d.Request.Nodes = o.nodes
	if o.maxPrice != "" {
		p, err := market.ParsePrice(o.maxPrice)
		if err != nil {
			return market.Declaration{}, fmt.Errorf("--max-price: %w", err)
		}
		d.Request.MaxPrice = p
	}
	d.After, d.AfterAny = o.after, o.afterAny
	a, err := arrayFromFlags(o)
	if err != nil {
		return market.Declaration{}, err
	}
	d.Array = a
	d.Output.Path = cleanJobPath(o.outputPath)
	d.Work.Workdir = cleanJobPath(o.workdir)
	for _, kv := range o.env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return market.Declaration{}, fmt.Errorf("--env %q: want NAME=VALUE", kv)
		}
		if d.Work.Env == nil {
			d.Work.Env = map[string]string{}
		}
		d.Work.Env[k] = v
	}
	if o.ckptPath != "" {
		every, err := market.ParseDuration(o.ckptEvery)
		if err != nil {
			return market.Declaration{}, fmt.Errorf("--checkpoint-every: %w", err)
		}
		d.Output.Checkpoints = &market.Checkpoints{Path: cleanJobPath(o.ckptPath), Every: every}
		if o.resume != "" {
			d.Output.Checkpoints.Resume, d.Output.Checkpoints.MaxResumes = o.resume, o.maxResumes
		}
	} else if o.resume != "" {
		return market.Declaration{}, fmt.Errorf("--resume %s: a job resumes from its checkpoints; give --checkpoint-path too", o.resume)
	}
	if err := d.Validate(); err != nil {
		return market.Declaration{}, fmt.Errorf("the job is not valid:\n%w", err)
	}
	wd, err := os.Getwd()
	if err != nil {
		return market.Declaration{}, err
	}
	return d, absSources(&d, wd)
}

func runSubmit(ctx context.Context, o submitOptions, g *globalOptions, args []string, dash int) error {
	var d market.Declaration
	var err error
	base := "."
	switch {
	case dash >= 0:
		if dash > 0 {
			return fmt.Errorf("give either FILE or flags and -- CMD, not both")
		}
		if len(args) == 0 {
			return errors.New("no command after --")
		}
		d, err = declarationFromFlags(o, args)
	case len(args) == 0 && o.image != "":
		// The image's own Entrypoint and Cmd run.
		d, err = declarationFromFlags(o, nil)
	case len(args) == 1 && isPipelineFile(args[0]):
		return submitPipeline(ctx, o, g, args[0])
	case len(args) == 1:
		d, err = declarationFromFile(args[0])
		base = filepath.Dir(args[0])
	default:
		return errors.New("submit takes one declaration FILE, or flags and -- CMD (see e31 submit --help)")
	}
	if err != nil {
		return err
	}
	if err := checkJob(o, g, &d, base); err != nil {
		return err
	}
	secrets, err := jobSecrets(o.secrets, &d)
	if err != nil {
		return err
	}
	raw, err := json.Marshal(d)
	if err != nil {
		return err
	}
	bars := newProgress(g.stderr, o.json)
	job, err := g.client().Submit(ctx, api.SubmitRequest{Declaration: raw, Secrets: secrets}, bars.update)
	bars.finish()
	if err != nil {
		return err
	}
	if err := sayNeverHeld(ctx, g, d, job, o.wait, o.json); err != nil {
		return err
	}
	if o.wait {
		return followAndGet(ctx, g, job.ID, followOptions{json: o.json, outDir: o.outDir, poll: o.pollEvery, timeout: o.waitTimeout, retryFor: o.retryFor})
	}
	if o.json {
		return g.printJSON(job)
	}
	fmt.Fprintf(g.stdout, "%s\n", job.ID)
	fmt.Fprintf(g.stderr, "submitted %q as job %s; follow it with: e31 status %s\n", d.Name, job.ID, job.ID)
	return nil
}

// checkJob adds the --label labels to a job's declaration and refuses it,
// before anything is broadcast, when a note predicts a certain failure
// (unless --force); the other notes it prints. base is the folder the
// command's relative paths are read from.
func checkJob(o submitOptions, g *globalOptions, d *market.Declaration, base string) error {
	for _, kv := range o.labels {
		k, v, err := market.ParseLabel(kv)
		if err != nil {
			return fmt.Errorf("--label: %w", err)
		}
		if d.Labels == nil {
			d.Labels = map[string]string{}
		}
		d.Labels[k] = v
	}
	if len(d.Labels) > market.MaxLabels {
		return fmt.Errorf("--label: the job would have %d labels, over the %d it may have", len(d.Labels), market.MaxLabels)
	}
	if o.flagSet != nil {
		if err := o.check.apply(o.flagSet, d); err != nil {
			return err
		}
	}
	var unstaged []string
	if abs, err := filepath.Abs(base); err == nil {
		unstaged = unstagedPaths(*d, abs)
	}
	readOnly := readOnlyWrites(*d)
	if (len(unstaged) > 0 || len(readOnly) > 0) && !o.force {
		// The job would fail on the meter, on the provider, for want of a
		// file that is here or for a write it may not make: refuse before
		// anything is broadcast.
		var b strings.Builder
		if len(unstaged) > 0 {
			fmt.Fprintf(&b, "the job would not find what its command names, and would fail on the provider:\n  %s\n", strings.Join(unstaged, "\n  "))
		}
		if len(readOnly) > 0 {
			fmt.Fprintf(&b, "the job would write where its sandbox is read-only, and would fail on the provider:\n  %s\n", strings.Join(readOnly, "\n  "))
		}
		b.WriteString("fix the declaration, or submit anyway with --force")
		return errors.New(b.String())
	}
	for _, note := range slices.Concat(unstaged, readOnly) {
		fmt.Fprintf(g.stderr, "e31: note: %s\n", note)
	}
	for _, w := range slices.Concat(credentialNotes(*d), shellVarNotes(*d)) {
		fmt.Fprintf(g.stderr, "e31: warning: %s\n", w)
	}
	return nil
}
