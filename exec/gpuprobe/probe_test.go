package gpuprobe

import (
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestKernelPTX holds the PTX to what the launch passes and checks that it
// is consistent in the ways a driver's JIT would refuse: no driver runs
// here, so a mistake would otherwise show only on a GPU.
func TestKernelPTX(t *testing.T) {
	ptx := kernelPTX
	lines := strings.Split(ptx, "\n")
	if lines[0] != ".version 6.0" || lines[1] != ".target sm_50" || lines[2] != ".address_size 64" {
		t.Errorf("header %q, want .version 6.0, .target sm_50, .address_size 64", lines[:3])
	}

	entry := regexp.MustCompile(`(?s)\.visible \.entry (\w+)\(\s*(.*?)\s*\)\s*\{(.*)\}\s*$`).FindStringSubmatch(ptx)
	if entry == nil {
		t.Fatalf("no .visible .entry NAME(params) { body } in:\n%s", ptx)
	}
	name, paramList, body := entry[1], entry[2], entry[3]
	if name != kernelName {
		t.Errorf("entry %q, the launch asks for %q", name, kernelName)
	}
	var types, params []string
	for p := range strings.SplitSeq(paramList, ",") {
		f := strings.Fields(p)
		if len(f) != 3 || f[0] != ".param" {
			t.Fatalf("parameter %q is not .param .TYPE NAME", p)
		}
		types, params = append(types, f[1]), append(params, f[2])
	}
	if !slices.Equal(types, kernelParams) {
		t.Errorf("parameters of types %v, the launch passes %v", types, kernelParams)
	}
	// Each parameter is loaded once, with its own type.
	for i, p := range params {
		load := "ld.param" + types[i] + "\t"
		if n := strings.Count(body, "["+p+"]"); n != 1 || !strings.Contains(body, load) {
			t.Errorf("parameter %s is used %d times, want once by %s", p, n, load)
		}
	}

	// Registers: every one used is declared (%r<6> declares %r0 to %r5).
	declared := map[string]int{}
	for _, m := range regexp.MustCompile(`\.reg \.\w+\s+%(\w+)<(\d+)>;`).FindAllStringSubmatch(body, -1) {
		n, _ := strconv.Atoi(m[2])
		declared[m[1]] = n
	}
	if len(declared) != 4 {
		t.Errorf("register declarations %v, want p, r, f and rd", declared)
	}
	special := map[string]bool{"ctaid": true, "ntid": true, "tid": true}
	for _, m := range regexp.MustCompile(`%([a-z]+)(\d*)`).FindAllStringSubmatch(body, -1) {
		if special[m[1]] {
			continue
		}
		n, ok := declared[m[1]]
		if m[2] == "" {
			if !ok {
				t.Errorf("%%%s is neither a declared register nor a special one", m[1])
			}
			continue
		}
		if i, _ := strconv.Atoi(m[2]); !ok || i >= n {
			t.Errorf("register %%%s%s is not declared (%%%s<%d>)", m[1], m[2], m[1], n)
		}
	}
	// The global index comes from the block and thread ids.
	for _, s := range []string{"%ctaid.x", "%ntid.x", "%tid.x", "cvta.to.global.u64", "setp.", "ret;"} {
		if !strings.Contains(body, s) {
			t.Errorf("the kernel does not use %s", s)
		}
	}

	// Branches go to labels that exist; statements end with a semicolon.
	labels := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^(\w+):$`).FindAllStringSubmatch(body, -1) {
		labels[m[1]] = true
	}
	for _, m := range regexp.MustCompile(`\bbra\s+(\w+);`).FindAllStringSubmatch(body, -1) {
		if !labels[m[1]] {
			t.Errorf("branch to %s, which is not a label", m[1])
		}
	}
	for _, l := range strings.Split(body, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasSuffix(l, ":") || strings.HasPrefix(l, "//") {
			continue
		}
		if !strings.HasSuffix(l, ";") {
			t.Errorf("statement %q does not end with ;", l)
		}
	}
	if strings.Count(ptx, "{") != 1 || strings.Count(ptx, "}") != 1 {
		t.Error("braces do not pair")
	}
}

func TestGridCoversEveryElement(t *testing.T) {
	for _, n := range []int{1, blockSize - 1, blockSize, blockSize + 1, elements} {
		if g := gridSize(n); g*blockSize < n || (g-1)*blockSize >= n {
			t.Errorf("gridSize(%d) = %d blocks of %d", n, g, blockSize)
		}
	}
	// Input and output sit in the allocation without overlapping.
	if elements*4 > allocBytes/2 {
		t.Errorf("%d floats do not fit in half of %d bytes", elements, allocBytes)
	}
}

func TestCheckOutput(t *testing.T) {
	x := kernelInput(elements)
	y := make([]float32, len(x))
	for i := range x {
		y[i] = x[i]*2 + 1
	}
	if n, err := checkOutput(x, y); n != elements || err != nil {
		t.Errorf("right output: %d checked, %v", n, err)
	}
	y[77] = 0
	if n, err := checkOutput(x, y); n != 78 || err == nil || !strings.Contains(err.Error(), "element 77") {
		t.Errorf("wrong element 77: %d checked, %v", n, err)
	}
	// The input's values are exact in float32 and through the kernel.
	for i, v := range x {
		if float32(int(v)) != v || int(v) != i%65536 {
			t.Fatalf("x[%d] = %g", i, v)
		}
	}
}

func TestFormatUUID(t *testing.T) {
	b := [16]byte{0x5e, 0x2f, 0x01, 0x8a, 0x9c, 0x41, 0x4f, 0x1b, 0x8e, 0x30, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66}
	if got, want := formatUUID(b), "GPU-5e2f018a-9c41-4f1b-8e30-112233445566"; got != want {
		t.Errorf("formatUUID = %s, want %s", got, want)
	}
	if got := cudaVersion(12040); got != "12.4" {
		t.Errorf("cudaVersion(12040) = %s", got)
	}
	if got := cudaVersion(13010); got != "13.1" {
		t.Errorf("cudaVersion(13010) = %s", got)
	}
}

func TestCallError(t *testing.T) {
	for _, tc := range []struct {
		e    CallError
		want string
	}{
		{CallError{Call: "cuMemAlloc_v2", Code: 2, Name: "CUDA_ERROR_OUT_OF_MEMORY", Text: "out of memory"}, "cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (out of memory)"},
		{CallError{Call: "cuInit", Code: 999}, "cuInit: CUDA error 999"},
		{CallError{Call: "cuModuleLoadDataEx", Code: 218, Name: "CUDA_ERROR_INVALID_PTX", Log: "ptxas fatal"}, "cuModuleLoadDataEx: CUDA_ERROR_INVALID_PTX: ptxas fatal"},
	} {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.e, got, tc.want)
		}
	}
}

func TestReportOK(t *testing.T) {
	good := Device{Index: 0, KernelOK: true, Elements: elements}
	for _, tc := range []struct {
		name string
		r    Report
		want bool
	}{
		{"one good device", Report{DeviceCount: 1, Devices: []Device{good}}, true},
		{"no device", Report{Devices: []Device{}}, false},
		{"driver error", Report{Error: "cuInit: CUDA_ERROR_NO_DEVICE", Devices: []Device{good}}, false},
		{"a device failed", Report{DeviceCount: 2, Devices: []Device{good, {Index: 1, Error: "cuMemAlloc_v2: ..."}}}, false},
	} {
		if got := tc.r.OK(); got != tc.want {
			t.Errorf("%s: OK = %v", tc.name, got)
		}
	}
	// The field names are what e31d doctor reads back.
	b, _ := json.Marshal(Report{CUDA: "12.4", DeviceCount: 1, Devices: []Device{good}})
	for _, k := range []string{`"cuda":"12.4"`, `"device_count":1`, `"kernel_ok":true`, `"elements":1048576`, `"uuid":""`, `"took_ns":0`} {
		if !strings.Contains(string(b), k) {
			t.Errorf("JSON lacks %s: %s", k, b)
		}
	}
}
