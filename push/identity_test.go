package push

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// TestFileReplacedAfterWalk: a file replaced between the walk and the
// open (by a symbolic link to another file, another file, a directory, a
// FIFO, or through a directory on its path) fails the push with
// ErrReplaced naming it, and nothing of what now stands at its path is
// uploaded.
func TestFileReplacedAfterWalk(t *testing.T) {
	// replace puts something else at dir/file; other is a file outside
	// dir holding bytes of the listed file's size that must never be
	// uploaded.
	tests := []struct {
		name    string
		file    string
		replace func(t *testing.T, dir, file, other string)
	}{
		{"symlink to another file", "seg/_0.doc", func(t *testing.T, dir, file, other string) {
			p := filepath.Join(dir, file)
			mustDo(t, os.Remove(p))
			mustDo(t, os.Symlink(other, p))
		}},
		{"symlink, compressed file", "seg/_0.fdt", func(t *testing.T, dir, file, other string) {
			p := filepath.Join(dir, file)
			mustDo(t, os.Remove(p))
			mustDo(t, os.Symlink(other, p))
		}},
		{"another file renamed over it", "seg/_0.doc", func(t *testing.T, dir, file, other string) {
			mustDo(t, os.Rename(other, filepath.Join(dir, file)))
		}},
		{"a directory", "segments_1", func(t *testing.T, dir, file, other string) {
			p := filepath.Join(dir, file)
			mustDo(t, os.Remove(p))
			mustDo(t, os.Mkdir(p, 0o755))
		}},
		{"a FIFO", "segments_1", func(t *testing.T, dir, file, other string) {
			p := filepath.Join(dir, file)
			mustDo(t, os.Remove(p))
			mustDo(t, syscall.Mkfifo(p, 0o644))
		}},
		{"a directory on its path", "seg/_0.doc", func(t *testing.T, dir, file, other string) {
			// seg/ becomes a link to a directory whose _0.doc is other.
			elsewhere := t.TempDir()
			mustDo(t, os.Rename(other, filepath.Join(elsewhere, "_0.doc")))
			mustDo(t, os.Rename(filepath.Join(dir, "seg"), filepath.Join(dir, "seg.old")))
			mustDo(t, os.Symlink(elsewhere, filepath.Join(dir, "seg")))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, files := testShard(t)
			secret := bytes.Repeat([]byte("NOT-THE-LISTED-FILE "), len(files[tt.file])/20+1)[:len(files[tt.file])]
			other := filepath.Join(t.TempDir(), "other")
			writeLocal(t, other, secret)
			opt := testOptions(dir)
			opt.Parallel = 1 // every file before the replaced one is pushed
			mustDo(t, opt.validate())
			listed, err := walk(&opt)
			mustDo(t, err)
			tt.replace(t, dir, tt.file, other)

			tgt := newMemTarget()
			_, err = run(context.Background(), &opt, tgt, listed)
			p := filepath.Join(dir, tt.file)
			if !errors.Is(err, ErrReplaced) || !strings.Contains(err.Error(), p+": ") {
				t.Fatalf("err = %v, want ErrReplaced naming %s", err, p)
			}
			for _, k := range tgt.putKeys() {
				if strings.TrimSuffix(k, CompressedSuffix) == tt.file {
					t.Errorf("%s was uploaded", k)
				}
			}
			for _, k := range tgt.keys() {
				o, _ := tgt.get(k)
				data := o.data
				if strings.HasSuffix(k, CompressedSuffix) {
					data = decodeObject(t, data)
				}
				if bytes.Contains(data, secret[:20]) {
					t.Errorf("%s holds the bytes of the file now at %s", k, p)
				}
			}
		})
	}
}

// TestFileReplacedAfterHash: a file replaced by a symbolic link after it
// was hashed is uploaded from the file that was hashed (push keeps it
// open), never from the link's target.
func TestFileReplacedAfterHash(t *testing.T) {
	for _, file := range []string{"seg/_0.doc", "seg/_0.fdt"} {
		t.Run(file, func(t *testing.T) {
			dir, files := testShard(t)
			p := filepath.Join(dir, file)
			other := filepath.Join(t.TempDir(), "other")
			writeLocal(t, other, bytes.Repeat([]byte{'x'}, len(files[file])))
			tgt := newMemTarget()
			var once sync.Once
			tgt.beforeCheck = func(key string) {
				if strings.TrimSuffix(key, CompressedSuffix) == file {
					once.Do(func() {
						mustDo(t, os.Remove(p))
						mustDo(t, os.Symlink(other, p))
					})
				}
			}
			if _, _, err := pushTo(context.Background(), testOptions(dir), tgt); err != nil {
				t.Fatal(err)
			}
			key := file
			o, ok := tgt.get(key)
			if !ok {
				key += CompressedSuffix
				o, ok = tgt.get(key)
			}
			if !ok {
				t.Fatalf("%s not stored (keys %v)", file, tgt.keys())
			}
			data := o.data
			if strings.HasSuffix(key, CompressedSuffix) {
				data = decodeObject(t, data)
			}
			if !bytes.Equal(data, files[file]) {
				t.Errorf("%s holds other bytes than the file that was listed and hashed", key)
			}
		})
	}
}

func mustDo(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
