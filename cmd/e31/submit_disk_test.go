package main

import (
	"strings"
	"testing"
)

func TestSubmitDiskFlag(t *testing.T) {
	d, err := declarationFromFlags(submitOptions{gpus: 1, limit: "1h", disk: "50GiB", outputPath: "/out"}, []string{"true"})
	if err != nil || d.Request.Disk != 50<<30 {
		t.Fatalf("--disk 50GiB: %v, %v", d.Request.Disk, err)
	}
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := declarationFromFlags(submitOptions{gpus: 1, limit: "1h", disk: "lots", outputPath: "/out"}, []string{"true"}); err == nil || !strings.Contains(err.Error(), "--disk") {
		t.Fatalf("--disk lots: %v", err)
	}
}
