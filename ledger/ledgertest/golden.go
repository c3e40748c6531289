package ledgertest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// FillAll sets every exported field reachable from ptr (a pointer to a
// value) to a value that differs from every other field's, so that an
// encoding of the result shows each field and where it goes. Pointers,
// slices and maps get one element each; times fall on 2026-12-07.
func FillAll(ptr any) {
	fill(reflect.ValueOf(ptr).Elem(), new(int))
}

func fill(v reflect.Value, n *int) {
	*n++
	switch v.Kind() {
	case reflect.String:
		v.SetString(fmt.Sprintf("s%d", *n))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if v.Type() == reflect.TypeOf(time.Duration(0)) {
			v.SetInt(int64(*n) * int64(time.Second))
			return
		}
		v.SetInt(int64(*n))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(*n))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(*n) + 0.5)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(p.Elem(), n)
		v.Set(p)
	case reflect.Slice:
		switch {
		case v.Type() == reflect.TypeOf(json.RawMessage(nil)):
			v.SetBytes(fmt.Appendf(nil, `{"raw":%d}`, *n))
		case v.Type().Elem().Kind() == reflect.Uint8:
			v.SetBytes(fmt.Appendf(nil, "b%d", *n))
		default:
			s := reflect.MakeSlice(v.Type(), 1, 1)
			fill(s.Index(0), n)
			v.Set(s)
		}
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k := reflect.New(v.Type().Key()).Elem()
		fill(k, n)
		e := reflect.New(v.Type().Elem()).Elem()
		fill(e, n)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Struct:
		if v.Type() == reflect.TypeOf(time.Time{}) {
			v.Set(reflect.ValueOf(time.Date(2026, 12, 7, 12, 0, *n, 0, time.UTC)))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), n)
			}
		}
	}
}

// Pinned compares got with the file at path, or writes got there when
// update is set: the bytes an encoding produced on the day it was pinned.
func Pinned(t testing.TB, path string, got []byte, update bool) {
	t.Helper()
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read pinned bytes: %v (run the test with -update to pin today's)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("the encoding differs from %s:\n%s", path, got)
	}
}

// PinnedTypes fills each of values (pointers to values of distinct types,
// FillAll) and compares its indented JSON with dir/TypeName.json, as
// Pinned does: the encoding of every field of every type, pinned.
func PinnedTypes(t *testing.T, dir string, values []any, update bool) {
	t.Helper()
	for _, v := range values {
		name := reflect.TypeOf(v).Elem().Name()
		t.Run(name, func(t *testing.T) {
			FillAll(v)
			got, err := json.MarshalIndent(v, "", " ")
			if err != nil {
				t.Fatalf("encode %s: %v", name, err)
			}
			Pinned(t, filepath.Join(dir, name+".json"), append(got, '\n'), update)
		})
	}
}
