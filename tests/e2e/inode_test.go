package e2e

import (
	"bytes"
	"encoding/binary"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// The mount's root shows inode 1 (the FUSE root's), and every file and
// directory its own non-zero inode that fits 32 bits, the same in a stat
// and in its directory's listing, and the same when asked again: find,
// du and tar tell files apart by them.
func TestInodeNumbers(t *testing.T) {
	srv := needServer(t)
	bucket := newBucket(t, srv)
	objs := map[string][]byte{
		"idx/0/_0.cfs":     randomBytes(1, 3000),
		"idx/0/_0.si":      randomBytes(2, 300),
		"idx/1/segments_2": randomBytes(3, 200),
		"top":              randomBytes(4, 10),
		"z/y/x/w":          randomBytes(5, 20),
	}
	putObjects(t, srv, bucket, objs)
	m := mountS3(t, srv, "s3://"+bucket)

	// inos returns each name's st_ino, and its d_ino in its directory's
	// listing.
	inos := func() (stat, dirent map[string]uint64) {
		t.Helper()
		stat, dirent = map[string]uint64{}, map[string]uint64{}
		err := filepath.WalkDir(m.Dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			var st syscall.Stat_t
			if err := syscall.Lstat(p, &st); err != nil {
				return err
			}
			rel, _ := filepath.Rel(m.Dir, p)
			stat[rel] = st.Ino
			if d.IsDir() {
				for name, ino := range direntInos(t, p) {
					dirent[filepath.Join(rel, name)] = ino
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return stat, dirent
	}
	stat, dirent := inos()
	if stat["."] != 1 {
		t.Errorf("the mount's root has st_ino %d, want 1", stat["."])
	}
	// The files, the root and the directories idx, idx/0, idx/1, z, z/y,
	// z/y/x.
	if want := len(objs) + 1 + 6; len(stat) != want || len(dirent) != want-1 {
		t.Fatalf("the mount shows %d names (%d listed), want %d: %v", len(stat), len(dirent), want, stat)
	}
	seen := map[uint64]string{}
	for p, ino := range stat {
		// Non-zero, and within 32 bits: a program built with a 32-bit
		// st_ino fails its stat with EOVERFLOW on a larger one.
		if ino == 0 || ino > 1<<32-1 {
			t.Errorf("%s has st_ino %d", p, ino)
		}
		if other, ok := seen[ino]; ok {
			t.Errorf("%s and %s share st_ino %d", p, other, ino)
		}
		seen[ino] = p
		if d, ok := dirent[p]; p != "." && d != ino {
			t.Errorf("%s: its directory lists inode %d (%v), stat says %d", p, d, ok, ino)
		}
	}
	checkObjects(t, m.Dir, objs)
	again, _ := inos()
	if !maps.Equal(stat, again) {
		t.Errorf("the inode numbers changed while mounted:\n%v\n%v", stat, again)
	}
	t.Logf("inode numbers: %v", stat)
}

// direntInos returns the d_ino of each name that a getdents64 of dir
// gives, "." and ".." aside.
func direntInos(t *testing.T, dir string) map[string]uint64 {
	t.Helper()
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]uint64{}
	buf := make([]byte, 64<<10)
	for {
		n, err := syscall.Getdents(int(f.Fd()), buf)
		if err != nil {
			t.Fatalf("getdents %s: %v", dir, err)
		}
		if n == 0 {
			return out
		}
		// struct linux_dirent64: d_ino u64, d_off s64, d_reclen u16,
		// d_type u8, d_name NUL-terminated.
		for b := buf[:n]; len(b) >= 19; {
			reclen := int(binary.NativeEndian.Uint16(b[16:]))
			if reclen < 19 || reclen > len(b) {
				t.Fatalf("getdents %s: bad record length %d", dir, reclen)
			}
			name, _, _ := bytes.Cut(b[19:reclen], []byte{0})
			if s := string(name); s != "." && s != ".." {
				out[s] = binary.NativeEndian.Uint64(b)
			}
			b = b[reclen:]
		}
	}
}
