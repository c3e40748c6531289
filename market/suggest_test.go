package market

import (
	"strings"
	"testing"
)

// An unknown field's error names the field it is a likely typo of, or the
// section a field of that name belongs to.
func TestUnknownFieldSuggests(t *testing.T) {
	base := "name: x\nwork: {command: [true]}\nrequest: {gpus: 1, limit: 1h}\n"
	for _, c := range []struct {
		yaml, want string
	}{
		{"name: x\nwork: {comand: [true]}\nrequest: {gpus: 1, limit: 1h}\n", "work.comand: unknown field (want one of image, command, env, workdir); did you mean command?"},
		{base + "resume: auto\n", "resume: unknown field (want one of name, work, data, request, output, labels, after, after_any, array, secrets, verify); resume goes under output.checkpoints"},
		{"name: x\nwork: {command: [true]}\nrequest: {gpu: 1, limit: 1h}\n", "did you mean gpus?"},
		{"name: x\nwork: {command: [true]}\nrequest: {gpus: 1, limit: 1h}\ndata: [{source: ./a, mount: /a, mnt: /b}]\n", "unknown field (want one of source, mount)"},
		{base + "zzzzzz: 1\n", "zzzzzz: unknown field (want one of name, work, data, request, output, labels, after, after_any, array, secrets, verify)\n"},
	} {
		_, err := DecodeDeclaration([]byte(c.yaml))
		if err == nil || !strings.Contains(err.Error()+"\n", c.want) {
			t.Errorf("%q: %v\nwant it to contain %q", c.yaml, err, c.want)
		}
	}
}

func TestNearest(t *testing.T) {
	known := []string{"gpus", "gpu_model", "gpu_memory", "cpus", "memory", "disk", "limit"}
	for s, want := range map[string]string{"gpu": "gpus", "limt": "limit", "memroy": "memory", "gpumodel": "gpu_model", "x": "", "cpu": "cpus", "pus": ""} {
		if got := nearest(s, known); got != want {
			t.Errorf("nearest(%q) = %q, want %q", s, got, want)
		}
	}
}
