package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/segfs/segfs/tests/faults"
	"github.com/segfs/segfs/tests/localstore"
)

// segfs restore against a DEST_DIR that someone else can change while
// it runs, and against a disk that cannot hold the shard.

// treeState is every entry below dir with its mode and, for a regular
// file, its length and hash: what a restore outside DEST_DIR must not change.
func treeState(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		v := fi.Mode().String()
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			v += fmt.Sprintf(" %d bytes, sha-256 %x", len(b), sha256.Sum256(b))
		}
		out[rel] = v
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// startRestore starts segfs restore with its output in out; the channel
// gets its exit once it has ended.
func startRestore(t *testing.T, cmd *exec.Cmd, out *syncBuffer) <-chan error {
	t.Helper()
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	return done
}

// waitOutput waits until out holds s, failing the test if the restore
// ends or a minute passes first.
func waitOutput(t *testing.T, cmd *exec.Cmd, done <-chan error, out *syncBuffer, s string) {
	t.Helper()
	deadline := time.After(time.Minute)
	for !strings.Contains(out.String(), s) {
		select {
		case err := <-done:
			t.Fatalf("segfs restore ended (%v) before it printed %q:\n%s", err, s, out.String())
		case <-deadline:
			cmd.Process.Kill()
			t.Fatalf("segfs restore printed no %q within a minute:\n%s", s, out.String())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// A directory of DEST_DIR swapped for a symlink to a directory outside
// it while a restore (as root, into a directory its service user owns)
// is writing: the restore is stopped at its first logged file of that
// directory, the directory moved aside and a link to a root-only
// directory put in its place, and the restore resumed. Nothing is
// written, removed or replaced in the linked directory, and the files
// of the swapped directory not restored yet fail, each named. The
// second case is a resume into a finished restore whose files of that
// directory were removed: before, the swap made root replace a 0600
// file of the linked directory under one of those names.
func TestRestoreSymlinkSwap(t *testing.T) {
	srv := needServer(t)
	bucket := newBucket(t, srv)
	objs := map[string][]byte{"top.txt": []byte("top\n")}
	var names []string
	for i := range 8 {
		// x/a is the smallest and so the first file of x/ restored.
		n := fmt.Sprintf("x/%c", 'a'+i)
		objs[n] = bytes.Repeat([]byte{byte('a' + i)}, 1000+20000*i)
		names = append(names, n)
	}
	putObjects(t, srv, bucket, objs)
	// Every GET waits, so that the restore is still writing x/ when it
	// is stopped.
	proxy := newFaultProxy(t, srv, faults.Rule{Name: "slow", Fault: faults.StallHeaders, Stall: 200 * time.Millisecond})
	source := "s3://" + bucket

	for _, resume := range []bool{false, true} {
		t.Run(map[bool]string{false: "fresh", true: "resume"}[resume], func(t *testing.T) {
			tmp := t.TempDir()
			dest := filepath.Join(tmp, "dest")
			if err := os.Mkdir(dest, 0o755); err != nil {
				t.Fatal(err)
			}
			// The victim: a root-only directory holding a 0600 file
			// under a name the restore writes.
			victim := filepath.Join(tmp, "root-only")
			if err := os.Mkdir(victim, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(victim, "h"), []byte("root's own\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			args := []string{"--max-fetches", "1", "--no-cache", "--part-size", "1MiB"}
			if resume {
				// Through the proxy too: DEST_DIR's mark names the
				// endpoint.
				if r := runRestoreCmd(t, srv, proxy.URL(), source, dest, args...); r.code != 0 {
					t.Fatalf("the first restore: exit %d:\n%s", r.code, r.out)
				}
				for _, n := range names[1:] {
					if err := os.Remove(filepath.Join(dest, n)); err != nil {
						t.Fatal(err)
					}
				}
				if err := os.Remove(filepath.Join(dest, "x", "a")); err != nil {
					t.Fatal(err)
				}
			}
			// DEST_DIR is the service user's, as when the engine is to
			// own the restored shard.
			if err := filepath.Walk(dest, func(p string, _ os.FileInfo, err error) error {
				if err != nil {
					return err
				}
				return os.Lchown(p, 65534, 65534)
			}); err != nil {
				t.Fatal(err)
			}
			before := treeState(t, victim)

			ctx, cancel := context.WithTimeout(context.Background(), restoreTimeout)
			defer cancel()
			cmd := restoreCommand(ctx, t, srv, proxy.URL(), source, dest, args...)
			var out syncBuffer
			done := startRestore(t, cmd, &out)
			waitOutput(t, cmd, done, &out, "msg=restored file=x/a ")
			if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			swapErr := os.Rename(filepath.Join(dest, "x"), filepath.Join(dest, "x.old"))
			if swapErr == nil {
				swapErr = os.Symlink(victim, filepath.Join(dest, "x"))
			}
			if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			if swapErr != nil {
				t.Fatal(swapErr)
			}
			var err error
			select {
			case err = <-done:
			case <-time.After(time.Minute):
				cmd.Process.Kill()
				t.Fatalf("segfs restore still running a minute after the swap:\n%s", out.String())
			}
			sameTree := func() {
				t.Helper()
				after := treeState(t, victim)
				if fmt.Sprint(after) != fmt.Sprint(before) {
					t.Errorf("the linked directory changed:\nbefore %q\nafter  %q", before, after)
				}
			}
			sameTree()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 {
				t.Fatalf("exit %v, want 1 (files of x/ failed):\n%s", err, out.String())
			}
			failed := 0
			for _, n := range names[1:] {
				if strings.Contains(out.String(), "restore: "+n+": ") {
					failed++
				}
			}
			if failed == 0 || !strings.Contains(out.String(), "symbolic link") {
				t.Errorf("no file of x/ failed naming the symbolic link:\n%s", out.String())
			}
			t.Logf("%d of the %d files of x/ after the swap failed", failed, len(names)-1)
			// What was restored stays the source's; nothing landed in
			// the moved directory under a final name but x/a.
			for n, b := range finalNames(localstore.ReadTree(t, filepath.Join(dest, "x.old"))) {
				if want := objs["x/"+n]; !bytes.Equal(b, want) {
					t.Errorf("x.old/%s: %d bytes, not the source's", n, len(b))
				}
			}
		})
	}
}

// A restore into a file system too small for the shard fails the file
// that cannot fit, naming what it needs, before writing any of it, and
// restores the others (before: the large file's temporary copy filled
// the disk and a small file beside it failed with ENOSPC).
func TestRestoreFullDisk(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounts a small tmpfs: needs root")
	}
	srv := needServer(t)
	bucket := newBucket(t, srv)
	objs := map[string][]byte{
		"big":     bytes.Repeat([]byte("B"), 6<<20),
		"small-1": bytes.Repeat([]byte("1"), 300<<10),
		"small-2": bytes.Repeat([]byte("2"), 300<<10),
	}
	putObjects(t, srv, bucket, objs)
	disk := t.TempDir()
	if err := syscall.Mount("tmpfs", disk, "tmpfs", 0, "size=4m"); err != nil {
		t.Skipf("mount a 4 MiB tmpfs: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(disk, syscall.MNT_DETACH) })
	dest := filepath.Join(disk, "dest")

	// Each piece a part of 1 MiB: the big file's pieces would otherwise
	// be written at once beside the small files.
	r := runRestoreCmd(t, srv, "", "s3://"+bucket, dest, "--no-cache", "--part-size", "1MiB", "--max-fetches", "4")
	if r.code != 1 {
		t.Fatalf("exit %d, want 1 (big failed):\n%s", r.code, r.out)
	}
	if !strings.Contains(r.out, "restore: big: ") || !strings.Contains(r.out, "it needs 6.0 MiB") {
		t.Errorf("big does not fail naming what it needs:\n%s", r.out)
	}
	want := map[string][]byte{"small-1": objs["small-1"], "small-2": objs["small-2"]}
	sameFiles(t, localstore.ReadTree(t, dest), want) // and no temporary file
	if r.getBytes > int64(len(want["small-1"])+len(want["small-2"])) {
		t.Errorf("GETs received %d bytes; the files that fit hold %d", r.getBytes, 600<<10)
	}
}
