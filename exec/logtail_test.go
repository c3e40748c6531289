package exec

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

func TestTailFileKeepsTail(t *testing.T) {
	for _, limit := range []int64{1, 7, 100, 4096} {
		for _, chunk := range []int{1, 3, 50, 99, 100, 101, 5000} {
			name := filepath.Join(t.TempDir(), "log")
			tf, err := createTailFile(name, limit)
			if err != nil {
				t.Fatal(err)
			}
			var all bytes.Buffer
			for i := 0; all.Len() < 20000; i++ {
				p := bytes.Repeat([]byte(strconv.Itoa(i%10)), chunk)
				p[len(p)-1] = '\n'
				if n, err := tf.Write(p); err != nil || n != len(p) {
					t.Fatalf("Write = %d, %v", n, err)
				}
				all.Write(p)
				if tf.size > 2*limit {
					t.Fatalf("file grew to %d with limit %d", tf.size, limit)
				}
			}
			if err := tf.Close(); err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(name)
			want := all.Bytes()[int64(all.Len())-limit:]
			if !bytes.Equal(got, want) {
				t.Fatalf("limit %d chunk %d: kept %d bytes, not the last %d", limit, chunk, len(got), limit)
			}
		}
	}
}

func TestTailFileShort(t *testing.T) {
	name := filepath.Join(t.TempDir(), "log")
	tf, _ := createTailFile(name, 100)
	tf.Write([]byte("hello\n"))
	tf.Close()
	if got, _ := os.ReadFile(name); string(got) != "hello\n" {
		t.Fatalf("got %q", got)
	}
}
