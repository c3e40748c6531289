package market

import (
	"strings"
	"testing"
)

func TestVerifySection(t *testing.T) {
	job := "name: x\nwork: {command: [true]}\nrequest: {gpus: 1, limit: 1h}\noutput: {path: /out}\n"
	array := job + "array: {count: 10}\n"
	d, err := DecodeDeclaration([]byte(job + "verify: {replicas: 2, compare: {paths: [metrics.json, model/]}, min_record: 3}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if v := d.Verify; v.Replicas != 2 || v.MinRecord != 3 || v.Mode() != "paths:metrics.json,model/" || !v.Checks() {
		t.Fatalf("verify %+v, mode %q", v, v.Mode())
	}
	if _, err := DecodeDeclaration([]byte(array + "verify: {replicas: 2}\n")); err != nil {
		t.Errorf("replicas on an array: %v", err)
	}
	d, err = DecodeDeclaration([]byte(array + "verify: {spot: 5%}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if d.Verify.Spot != 0.05 || d.Verify.Mode() != "output" {
		t.Fatalf("spot %v, mode %q", d.Verify.Spot, d.Verify.Mode())
	}
	for _, c := range []struct{ doc, want string }{
		{job + "verify: {replicas: 4}\n", "verify.replicas: must be 2 or 3, not 4"},
		{job + "verify: {replicas: 1}\n", "verify.replicas: must be 2 or 3"},
		{job + "verify: {spot: 0.1}\n", "verify.spot: needs an array"},
		{array + "verify: {spot: 1.5}\n", "verify.spot: must be a share such as 0.05"},
		{array + "verify: {spot: -0.1}\n", "within (0, 1]"},
		{array + "verify: {spot: lots}\n", "is not a number"},
		{job + "verify: {replicas: 2, compare: {paths: [/etc/passwd]}}\n", "verify.compare.paths[0]: must be a path inside the output folder"},
		{job + "verify: {replicas: 2, compare: {paths: [../x]}}\n", "inside the output folder"},
		{job + "verify: {replicas: 2, compare: {paths: [a], command: [cmp]}}\n", "takes paths or command, not both"},
		{job + "verify: {replicas: 2, compare: {}}\n", "needs paths or command"},
		{job + "verify: {compare: {paths: [a]}}\n", "nothing runs twice to compare"},
		{job + "verify: {min_record: -1}\n", "verify.min_record"},
		{job + "verify: {replica: 2}\n", "verify.replica"},
		{job + "verify: [2]\n", "verify"},
	} {
		if _, err := DecodeDeclaration([]byte(c.doc)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", strings.TrimPrefix(c.doc, job), err, c.want)
		}
	}
}
