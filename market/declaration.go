package market

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/ipfs/go-cid"
)

// A Declaration is everything a submitter says about a job: what runs, what
// it reads, what it needs, and what comes back. Nothing in it may require a
// person during the run.
type Declaration struct {
	Name    string  `json:"name" yaml:"name"`
	Work    Work    `json:"work" yaml:"work"`
	Data    []Input `json:"data,omitempty" yaml:"data,omitempty"`
	Request Request `json:"request" yaml:"request"`
	Output  Output  `json:"output" yaml:"output"`
	// Labels are the submitter's own tags for the job (team: vision,
	// sweep: lr-3e-4), to select its jobs by. They stay on its node: the
	// submitter takes them out of what it signs and broadcasts.
	Labels map[string]string `json:"labels,omitempty" yaml:"labels,omitempty"`
	// After lists jobs of the submitter's node (IDs or unique prefixes)
	// that must complete before this job is announced: its submitter
	// holds it until they have, and ends it failed when one does not.
	// AfterAny lists jobs that must end, however they end. Both stay on
	// the submitter's node, as Labels do. A data source job:JOB/out names
	// an upstream's output folder, resolved when it completes.
	After    []string `json:"after,omitempty" yaml:"after,omitempty"`
	AfterAny []string `json:"after_any,omitempty" yaml:"after_any,omitempty"`
	// Array makes the declaration many tasks (see Array); nil: one job.
	Array *Array `json:"array,omitempty" yaml:"array,omitempty"`
	// Secrets name the values the job reads that only its provider may
	// see (see Secret): at the top level rather than under work, because
	// unlike work they are not all broadcast, and every task of an array
	// and part of a gang gets them all.
	Secrets []Secret `json:"secrets,omitempty" yaml:"secrets,omitempty"`
	// Verify asks the submitter to check the results (see Verify); it
	// stays on the submitter's node, as Labels do.
	Verify *Verify `json:"verify,omitempty" yaml:"verify,omitempty"`
}

// Work is the program the sandbox runs.
type Work struct {
	// Image is the job's software as an OCI image; empty runs the job on
	// the provider's base root. See image.go for the forms accepted and
	// how submit rewrites it.
	Image string `json:"image,omitempty" yaml:"image,omitempty"`
	// ImageRef is set by the submitter, never by a person: the registry
	// reference of a docker:// image pinned to its digest, so that a
	// provider may pull the same bytes from the registry instead of from
	// the submitter.
	ImageRef string            `json:"image_ref,omitempty" yaml:"image_ref,omitempty"`
	Command  []string          `json:"command" yaml:"command"`
	Env      map[string]string `json:"env,omitempty" yaml:"env,omitempty"`
	// Workdir is the folder the command starts in, created if missing (as
	// docker run -w does); empty: the image's WorkingDir, or without an
	// image the output folder.
	Workdir string `json:"workdir,omitempty" yaml:"workdir,omitempty"`
	// ImageSize is set by the submitter, never by a person: the bytes of
	// the image's DAG, so that Match can weigh which provider already
	// holds it.
	ImageSize Size `json:"image_size,omitempty" yaml:"image_size,omitempty"`
}

// Input is data staged read-only before the run.
type Input struct {
	// Source is a local path, imported at submit, a CID, or CID/PATH: a
	// file or folder inside a DAG the submitter holds (an earlier job's
	// output folder is OUTPUT-CID/out), resolved to its own CID at submit.
	Source string `json:"source" yaml:"source"`
	Mount  string `json:"mount" yaml:"mount"`
	// Size is set by the submitter at import, never by a person: the bytes
	// of the input's DAG, so that Match can weigh which provider already
	// holds it. 0 when unknown (a CID the submitter does not hold).
	Size Size `json:"size,omitempty" yaml:"size,omitempty"`
}

// Request is the compute a job holds and for how long at most.
type Request struct {
	GPUs      int      `json:"gpus" yaml:"gpus"`
	GPUModel  string   `json:"gpu_model,omitempty" yaml:"gpu_model,omitempty"`
	GPUMemory Size     `json:"gpu_memory,omitempty" yaml:"gpu_memory,omitempty"`
	CPUs      int      `json:"cpus" yaml:"cpus"`
	Memory    Size     `json:"memory" yaml:"memory"`
	Limit     Duration `json:"limit" yaml:"limit"`
	// Disk bounds what the job may write in all: output, checkpoints,
	// /tmp. 0, in a declaration from before the field, means DefaultDisk
	// (DiskBytes); the decoder fills the default in.
	Disk Size `json:"disk,omitempty" yaml:"disk,omitempty"`
	// Locality is "" (Match prefers a provider that holds the job's data)
	// or LocalityOff (it ignores what providers hold). It is the job's own
	// setting, not a peer's, so that every peer matches it alike.
	Locality string `json:"locality,omitempty" yaml:"locality,omitempty"`
	// LocalityWait is how long the job may wait for a provider that holds
	// its data while others could take it now (delay scheduling); 0 never
	// waits. See the package documentation.
	LocalityWait Duration `json:"locality_wait,omitempty" yaml:"locality_wait,omitempty"`
	// Retries is how many times the submitter runs the job again after
	// it fails by its own fault (outcome failed, attribution job): from
	// its last checkpoint where it took one, else from the beginning. A
	// job lost with its provider is resumed or requeued as before,
	// whatever Retries says. At most MaxRetries.
	Retries int `json:"retries,omitempty" yaml:"retries,omitempty"`
	// Nodes is how many providers the job runs on at once, as a gang: 0
	// or 1 is one; 2 to MaxNodes makes the job that many parts, each
	// asking for the rest of the request (gpus, cpus, memory, gpu_model,
	// gpu_memory are per node), which Match places all together on
	// distinct providers or not at all. Part i runs Task(i).
	Nodes int `json:"nodes,omitempty" yaml:"nodes,omitempty"`
	// MaxPrice is the most the job pays per GPU-hour, in the network's
	// currency: Match places it only on offers whose Price is at or under
	// it. 0: no cap. A job without GPUs is not capped (Offer.Price is per
	// GPU).
	MaxPrice Price `json:"max_price,omitempty" yaml:"max_price,omitempty"`
}

// Gang reports whether the request makes a gang: two nodes or more.
func (r Request) Gang() bool { return r.Nodes >= 2 }

// DiskBytes is the job's disk quota: Disk, or DefaultDisk when unset.
func (r Request) DiskBytes() uint64 {
	if r.Disk == 0 {
		return DefaultDisk
	}
	return uint64(r.Disk)
}

// Output says what comes back.
type Output struct {
	Path        string       `json:"path" yaml:"path"`
	Checkpoints *Checkpoints `json:"checkpoints,omitempty" yaml:"checkpoints,omitempty"`
}

// Checkpoints is intermediate output, fetched as it appears so that a run
// that stops short still returns its last state.
type Checkpoints struct {
	Path  string   `json:"path" yaml:"path"`
	Every Duration `json:"every" yaml:"every"`
	// Resume is "" (a stopped run stays stopped) or "auto" (the job is
	// resubmitted from its last checkpoint, at most MaxResumes times).
	Resume     string `json:"resume,omitempty" yaml:"resume,omitempty"`
	MaxResumes int    `json:"max_resumes,omitempty" yaml:"max_resumes,omitempty"`
	// From is the CID of the checkpoint a resumed run starts from: the
	// provider lays it out at Path, writable, before the run, so that the
	// job finds its checkpoint where it left it. Set by the submitter's
	// node for a resumption (e31 resume, resume: auto).
	From string `json:"from,omitempty" yaml:"from,omitempty"`
}

// Limits and defaults of a declaration. The caps are sanity bounds that
// catch typos ("memory: 8TiB" for 8GiB) rather than statements about any
// real machine.
const (
	MaxDeclarationBytes = 64 << 10
	MaxNameLen          = 128
	MaxGPUs             = 64
	MaxCPUs             = 1024
	MaxMemory           = 64 * TiB
	MinMemory           = 1 * MiB
	MaxDisk             = 64 * TiB
	MinDisk             = 16 * MiB
	MaxLimit            = 30 * Day
	MaxInputs           = 256
	MaxResumesCap       = 100
	MaxRetries          = 100
	MaxUpstreams        = 64
	// MaxNodes bounds request.nodes. A gang holds every provider it runs
	// on until its last part can start, so it is a number of machines
	// one training run spans, not a fleet.
	MaxNodes = 64
	// MaxInputSize bounds a recorded input or image size: far above any
	// dataset a job stages, low enough that a job's total cannot overflow.
	MaxInputSize = 1 << 50 // 1PiB
	// MaxLocalityWait bounds request.locality_wait. It is well under
	// DefaultStarvingAfter, and a starving job never waits for locality.
	MaxLocalityWait = 5 * Minute

	DefaultCPUs       = 1
	DefaultMemory     = 1 * GiB
	DefaultDisk       = 10 * GiB
	DefaultMaxResumes = 3
	DefaultOutputPath = "/out"
	ResumeAuto        = "auto"
	LocalityOff       = "off"
)

// ErrInvalidDeclaration is what every *DeclarationError is, for callers that
// only need to tell a bad declaration from a failure of their own.
var ErrInvalidDeclaration = errors.New("invalid declaration")

// A Problem is one thing wrong with a declaration.
type Problem struct {
	// Field is the path of the field, such as "request.gpus" or
	// "data[1].mount"; empty for the declaration as a whole.
	Field string `json:"field"`
	// Message says what is wanted.
	Message string `json:"message"`
}

func (p Problem) String() string {
	if p.Field == "" {
		return p.Message
	}
	return p.Field + ": " + p.Message
}

// DeclarationError lists every problem found, so that a submitter fixes a
// declaration in one go rather than one error per attempt.
type DeclarationError struct {
	Problems []Problem
}

func (e *DeclarationError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// Is makes errors.Is(err, ErrInvalidDeclaration) hold.
func (e *DeclarationError) Is(target error) bool { return target == ErrInvalidDeclaration }

// Unwrap returns ErrInvalidDeclaration.
func (e *DeclarationError) Unwrap() error { return ErrInvalidDeclaration }

// problems collects Problems; a nil result means none.
type problems struct {
	list    []Problem
	dropped int
}

// maxProblems bounds the report: a hostile 64KiB document could otherwise
// name thousands of unknown fields.
const maxProblems = 100

func (ps *problems) add(field, format string, args ...any) {
	if len(ps.list) >= maxProblems {
		ps.dropped++
		return
	}
	ps.list = append(ps.list, Problem{Field: field, Message: fmt.Sprintf(format, args...)})
}

func (ps *problems) err() error {
	if len(ps.list) == 0 {
		return nil
	}
	list := ps.list
	if ps.dropped > 0 {
		list = append(list, Problem{Message: fmt.Sprintf("and %d more problems", ps.dropped)})
	}
	return &DeclarationError{Problems: list}
}

// NewDeclaration builds a declaration from the few things a command line
// gives: the command, its GPUs and limit, and inputs. Everything else takes
// its default (1 CPU, 1GiB of memory, output at /out). An empty name becomes
// the base name of the program. The result is not validated; call Validate.
func NewDeclaration(name string, cmd []string, gpus int, limit Duration, inputs []Input) Declaration {
	if name == "" && len(cmd) > 0 {
		name = path.Base(cmd[0])
	}
	var data []Input
	if len(inputs) > 0 {
		data = append([]Input(nil), inputs...)
	}
	return Declaration{
		Name: name,
		Work: Work{Command: append([]string(nil), cmd...)},
		Data: data,
		Request: Request{
			GPUs:   gpus,
			CPUs:   DefaultCPUs,
			Memory: DefaultMemory,
			Limit:  limit,
			Disk:   DefaultDisk,
		},
		Output: Output{Path: DefaultOutputPath},
	}
}

// Validate checks everything that can be checked without the local file
// system. It expects defaults to be filled in already (DecodeDeclaration and
// NewDeclaration do so), because a declaration that arrives over the network
// must mean one thing to every peer: an omitted CPU count is refused here
// rather than guessed.
func (d Declaration) Validate() error {
	var ps problems
	validate(&d, &ps)
	return ps.err()
}

// Canonical returns the declaration as JSON with a fixed field order and
// sorted map keys, the bytes a submitter signs. An invalid declaration has no
// canonical form, since signing it would only spread a rejection.
func (d Declaration) Canonical() ([]byte, error) {
	if err := d.Validate(); err != nil {
		return nil, err
	}
	b, err := json.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("market: encode declaration: %w", err)
	}
	return b, nil
}

// CheckSources reports every local input that does not exist. A source that
// parses as a CID, or as CID/PATH, is taken as is: its blocks are in the
// store or on the network, not on the disk. exists is how the caller looks
// at its file system, so that market itself never touches one; an error
// from it stops the check.
func CheckSources(d Declaration, exists func(path string) (bool, error)) error {
	var ps problems
	for i, in := range d.Data {
		if _, _, inDAG := SplitCIDPath(in.Source); IsCID(in.Source) || inDAG {
			continue
		}
		if strings.HasPrefix(in.Source, JobSourcePrefix) {
			continue // an earlier job's output, resolved by the submitter
		}
		ok, err := exists(in.Source)
		if err != nil {
			return fmt.Errorf("market: check data[%d].source %q: %w", i, in.Source, err)
		}
		if !ok {
			ps.add(fmt.Sprintf("data[%d].source", i), "no such file or folder %q", in.Source)
		}
	}
	return ps.err()
}

// IsCID reports whether s is a content identifier rather than a path.
func IsCID(s string) bool {
	_, err := cid.Decode(s)
	return err == nil
}

// SplitCIDPath splits a source of the form CID/PATH into the CID and the
// clean path inside its DAG ("." for CID/). ok is false for anything else,
// a bare CID included, and for a path that climbs out of the DAG.
func SplitCIDPath(s string) (root cid.Cid, sub string, ok bool) {
	head, rest, found := strings.Cut(s, "/")
	if !found {
		return cid.Undef, "", false
	}
	c, err := cid.Decode(head)
	if err != nil {
		return cid.Undef, "", false
	}
	sub = path.Clean("/" + rest)[1:]
	if sub == "" {
		sub = "."
	}
	if rest != "" && path.Clean(rest) != sub {
		return cid.Undef, "", false // ".." or an absolute path: nothing inside the DAG
	}
	return c, sub, true
}

// validate appends a problem for each rule d breaks.
func validate(d *Declaration, ps *problems) {
	validateName(d.Name, ps)
	validateWork(&d.Work, ps)
	validateRequest(&d.Request, ps)
	validateLabels(d.Labels, ps)
	validateAfter("after", d.After, ps)
	validateAfter("after_any", d.AfterAny, ps)
	validateArray(d.Array, d.Work.Env, ps)
	validateSecrets(d.Secrets, d.Work.Env, ps)
	validateVerify(d, ps)
	if d.Array != nil && d.Request.Gang() {
		// A task of an array is one job; its parts would need IDs of two
		// levels, which neither the view nor SplitTaskID has.
		ps.add("request.nodes", "cannot be set with array: an array of gangs is not supported, submit the gangs one by one")
	}

	// Every path the sandbox mounts, in declaration order, so that an overlap
	// is reported on the later of the two.
	type mount struct{ field, path string }
	var mounts []mount
	if len(d.Data) > MaxInputs {
		ps.add("data", "must list at most %d inputs", MaxInputs)
	}
	for i, in := range d.Data {
		f := fmt.Sprintf("data[%d]", i)
		if in.Source == "" {
			ps.add(f+".source", "is required: a local path or a CID")
		} else {
			validateText(f+".source", in.Source, ps)
		}
		switch {
		case in.Size > MaxInputSize:
			ps.add(f+".size", "must be at most %s", Size(MaxInputSize))
		case in.Size != 0 && !IsCID(in.Source):
			ps.add(f+".size", "is set at submit, with the source imported as a CID; leave it out")
		}
		if validatePath(f+".mount", in.Mount, ps) {
			mounts = append(mounts, mount{f + ".mount", in.Mount})
		}
	}
	if d.Output.Path == "" {
		ps.add("output.path", "is required: an absolute path such as /out")
	} else if validatePath("output.path", d.Output.Path, ps) {
		mounts = append(mounts, mount{"output.path", d.Output.Path})
	}
	if c := d.Output.Checkpoints; c != nil {
		if c.Path == "" {
			ps.add("output.checkpoints.path", "is required: an absolute path such as /ckpt")
		} else if validatePath("output.checkpoints.path", c.Path, ps) {
			mounts = append(mounts, mount{"output.checkpoints.path", c.Path})
		}
		validateCheckpoints(c, ps)
	}
	for i := range mounts {
		for j := range i {
			if pathsOverlap(mounts[i].path, mounts[j].path) {
				ps.add(mounts[i].field, "%s overlaps %s %s: each must be outside the others", mounts[i].path, mounts[j].field, mounts[j].path)
				break
			}
		}
		if len(d.Secrets) > 0 && pathsOverlap(mounts[i].path, SecretsPath) {
			ps.add(mounts[i].field, "%s overlaps %s, where the job's secrets are: mount it elsewhere", mounts[i].path, SecretsPath)
		}
	}
}

func validateName(name string, ps *problems) {
	switch {
	case name == "":
		ps.add("name", "is required: a short label such as resnet-demo")
	case !utf8.ValidString(name):
		ps.add("name", "must be valid UTF-8")
	case utf8.RuneCountInString(name) > MaxNameLen:
		ps.add("name", "must be at most %d characters", MaxNameLen)
	default:
		for _, r := range name {
			if !unicode.IsPrint(r) {
				ps.add("name", "must be printable (found %q)", r)
				break
			}
		}
	}
}

func validateWork(w *Work, ps *problems) {
	switch {
	case len(w.Command) == 0 && w.Image == "":
		ps.add("work.command", "is required: the program and its arguments, such as [python3, train.py] (with work.image, the image's Entrypoint and Cmd run when it is left out)")
	case len(w.Command) > 0 && w.Command[0] == "":
		ps.add("work.command[0]", "must name the program to run")
	}
	for i, a := range w.Command {
		validateText(fmt.Sprintf("work.command[%d]", i), a, ps)
	}
	for _, k := range sortedKeys(w.Env) {
		f := envField(k)
		switch {
		case !validEnvName(k):
			ps.add(f, "must be a name of letters, digits and _ that does not start with a digit")
		case k == "CUDA_VISIBLE_DEVICES" || k == "NVIDIA_VISIBLE_DEVICES":
			ps.add(f, "is set by the provider to the leased GPUs and cannot be declared")
		}
		validateText(f, w.Env[k], ps)
	}
	if w.Workdir != "" {
		validateWorkdir(w.Workdir, ps)
	}
	validateImage(w, ps)
}

// validateWorkdir checks work.workdir as a mount point is checked, but /
// is allowed: nothing is mounted there.
func validateWorkdir(p string, ps *problems) {
	if p != "/" {
		validatePath("work.workdir", p, ps)
	}
}

func validateRequest(r *Request, ps *problems) {
	if r.GPUs < 0 || r.GPUs > MaxGPUs {
		ps.add("request.gpus", "must be between 0 and %d", MaxGPUs)
	}
	if r.GPUs == 0 {
		if r.GPUModel != "" {
			ps.add("request.gpu_model", "needs request.gpus of at least 1")
		}
		if r.GPUMemory != 0 {
			ps.add("request.gpu_memory", "needs request.gpus of at least 1")
		}
	}
	if len(r.GPUModel) > MaxNameLen || !utf8.ValidString(r.GPUModel) || strings.ContainsFunc(r.GPUModel, func(c rune) bool { return !unicode.IsPrint(c) }) {
		ps.add("request.gpu_model", "must be a printable model name such as H100, at most %d characters", MaxNameLen)
	}
	if r.GPUMemory > MaxMemory {
		ps.add("request.gpu_memory", "must be at most %s", Size(MaxMemory))
	}
	if r.CPUs < 1 || r.CPUs > MaxCPUs {
		ps.add("request.cpus", "must be between 1 and %d", MaxCPUs)
	}
	if r.Memory < MinMemory || r.Memory > MaxMemory {
		ps.add("request.memory", "must be a size between %s and %s, such as 8GiB", Size(MinMemory), Size(MaxMemory))
	}
	if r.Disk != 0 && (r.Disk < MinDisk || r.Disk > MaxDisk) {
		ps.add("request.disk", "must be a size between %s and %s, such as 50GiB (default %s)", Size(MinDisk), Size(MaxDisk), Size(DefaultDisk))
	}
	if r.Limit <= 0 || r.Limit > MaxLimit {
		ps.add("request.limit", "must be a positive duration such as 8h, at most %s", Duration(MaxLimit))
	}
	switch r.Locality {
	case "":
	case LocalityOff:
		if r.LocalityWait != 0 {
			ps.add("request.locality_wait", "needs locality left on")
		}
	default:
		ps.add("request.locality", "must be off or left out")
	}
	if r.LocalityWait < 0 || r.LocalityWait > MaxLocalityWait {
		ps.add("request.locality_wait", "must be a duration such as 30s, at most %s", Duration(MaxLocalityWait))
	}
	if r.Retries < 0 || r.Retries > MaxRetries {
		ps.add("request.retries", "must be between 0 and %d", MaxRetries)
	}
	if r.Nodes < 0 || r.Nodes > MaxNodes {
		ps.add("request.nodes", "must be between 1 and %d providers at once (0 means 1)", MaxNodes)
	}
	if r.MaxPrice < 0 || r.MaxPrice > MaxPrice {
		ps.add("request.max_price", "must be a price per GPU-hour such as 2.40, at most %s", MaxPrice)
	}
}

func validateCheckpoints(c *Checkpoints, ps *problems) {
	if c.From != "" && !IsCID(c.From) {
		ps.add("output.checkpoints.from", "must be the CID of a checkpoint")
	}
	if c.Every <= 0 || c.Every > MaxLimit {
		ps.add("output.checkpoints.every", "must be a positive duration such as 10m, at most %s", Duration(MaxLimit))
	}
	switch c.Resume {
	case "":
		if c.MaxResumes != 0 {
			ps.add("output.checkpoints.max_resumes", "needs resume: auto")
		}
	case ResumeAuto:
		if c.MaxResumes < 1 || c.MaxResumes > MaxResumesCap {
			ps.add("output.checkpoints.max_resumes", "must be between 1 and %d", MaxResumesCap)
		}
	default:
		ps.add("output.checkpoints.resume", "must be auto or left out")
	}
}

// validateText reports whether s can be carried as it is: valid UTF-8,
// which canonical JSON cannot represent otherwise, and no NUL, which no
// program argument, variable or path can hold.
func validateText(field, s string, ps *problems) bool {
	switch {
	case !utf8.ValidString(s):
		ps.add(field, "must be valid UTF-8")
	case strings.ContainsRune(s, 0):
		ps.add(field, "must not contain NUL")
	default:
		return true
	}
	return false
}

// validatePath reports whether p is usable as a mount point in the sandbox.
// Paths must be absolute and clean so that two spellings of one folder cannot
// slip past the overlap check, and must stay out of the kernel's file systems
// that the runtime mounts itself.
func validatePath(field, p string, ps *problems) bool {
	switch {
	case !validateText(field, p, ps):
	case !path.IsAbs(p):
		ps.add(field, "must be an absolute path such as /data, not %q", p)
	case p == "/":
		ps.add(field, "must not be the root folder /")
	case path.Clean(p) != p:
		ps.add(field, "must be a clean path: %q, not %q", path.Clean(p), p)
	case len(p) > 4096:
		ps.add(field, "must be at most 4096 bytes long")
	case pathsOverlap(p, "/proc") || pathsOverlap(p, "/sys") || pathsOverlap(p, "/dev"):
		ps.add(field, "must be outside /proc, /sys and /dev")
	default:
		return true
	}
	return false
}

// pathsOverlap reports whether one clean absolute path is the other or
// inside it; /out and /outside do not overlap.
func pathsOverlap(a, b string) bool {
	if len(a) > len(b) {
		a, b = b, a
	}
	return a == b || strings.HasPrefix(b, a+"/")
}

func validEnvName(k string) bool {
	if k == "" {
		return false
	}
	for i, c := range []byte(k) {
		switch {
		case c == '_', c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

func envField(k string) string {
	if validEnvName(k) {
		return "work.env." + k
	}
	return fmt.Sprintf("work.env[%q]", k)
}

// sortedKeys returns the keys of m in order, so that nothing depends on
// the order in which Go happens to walk a map.
func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// validateAfter checks a list of upstream jobs: IDs (or prefixes), each
// once, at most MaxUpstreams.
func validateAfter(field string, ids []string, ps *problems) {
	if len(ids) > MaxUpstreams {
		ps.add(field, "must list at most %d jobs", MaxUpstreams)
	}
	seen := map[string]bool{}
	for i, id := range ids {
		f := fmt.Sprintf("%s[%d]", field, i)
		switch {
		case id == "" || len(id) > 64 || strings.ContainsAny(id, " \t\n/:"):
			ps.add(f, "must be a job ID of this node")
		case seen[id]:
			ps.add(f, "names %s twice", id)
		}
		seen[id] = true
	}
}
