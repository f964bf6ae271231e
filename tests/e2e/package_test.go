package e2e

// The packages (make package): what the .deb and the .rpm hold, that
// `make install` puts the same files in the same places, and the .deb
// installed as an operator installs it, mounted through mount(8) and an
// fstab line with the binary mount.fuse3 finds on the default PATH, then
// removed without a trace.

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/segfs/segfs/tests/harness"
)

// packaged is every file the packages hold, with its mode.
var packaged = map[string]os.FileMode{
	"/usr/bin/segfs":                                  0o755,
	"/usr/lib/systemd/system/segfs@.service":          0o644,
	"/usr/share/man/man8/segfs.8.gz":                  0o644,
	"/usr/share/bash-completion/completions/segfs":    0o644,
	"/usr/share/zsh/vendor-completions/_segfs":        0o644,
	"/usr/share/fish/vendor_completions.d/segfs.fish": 0o644,
	"/usr/share/doc/segfs/README.md":                  0o644,
	"/usr/share/doc/segfs/USAGE.md":                   0o644,
	"/usr/share/doc/segfs/examples/segfs.env.example": 0o644,
}

// packagedRPM is packaged with the zsh completion where Fedora's zsh
// looks.
func packagedRPM() map[string]os.FileMode {
	m := maps.Clone(packaged)
	delete(m, "/usr/share/zsh/vendor-completions/_segfs")
	m["/usr/share/zsh/site-functions/_segfs"] = 0o644
	return m
}

// needPackages returns the .deb and the .rpm that make package wrote to
// $SEGFS_PKG_DIR, or skips (fails under make test) without them.
func needPackages(t *testing.T) (deb, rpm string) {
	t.Helper()
	dir := os.Getenv("SEGFS_PKG_DIR")
	if dir == "" {
		harness.SkipOrFail(t, fmt.Errorf("SEGFS_PKG_DIR is not set: run make package, or make test"))
	}
	debs, _ := filepath.Glob(filepath.Join(dir, "segfs_*.deb"))
	rpms, _ := filepath.Glob(filepath.Join(dir, "segfs-*.rpm"))
	if len(debs) != 1 || len(rpms) != 1 {
		harness.SkipOrFail(t, fmt.Errorf("want one .deb and one .rpm in %s, found %q and %q", dir, debs, rpms))
	}
	for _, tool := range []string{"dpkg", "dpkg-deb", "rpm"} {
		if _, err := exec.LookPath(tool); err != nil {
			harness.SkipOrFail(t, fmt.Errorf("%s is not installed (make pkgtools): %w", tool, err))
		}
	}
	return debs[0], rpms[0]
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestPackageContents checks both packages' files and modes, the .deb's
// fields, the binary (its version is the package's; it holds no path of
// the build machine), the unit and the man page; and that make install
// writes the same files, byte for byte, in the same places.
func TestPackageContents(t *testing.T) {
	deb, rpmFile := needPackages(t)

	// The .deb: its files (directories aside) and their modes.
	got := map[string]os.FileMode{}
	for _, line := range strings.Split(strings.TrimSpace(run(t, "dpkg-deb", "-c", deb)), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 {
			t.Fatalf("dpkg-deb -c line %q", line)
		}
		name := strings.TrimPrefix(f[len(f)-1], ".")
		if strings.HasPrefix(f[0], "d") {
			if !strings.HasPrefix(name, "/usr/") {
				t.Errorf("the .deb has the directory %s, outside /usr", name)
			}
			continue
		}
		if f[1] != "root/root" {
			t.Errorf("%s is owned by %s", name, f[1])
		}
		got[name] = permOf(t, f[0])
	}
	if !maps.Equal(got, packaged) {
		t.Errorf(".deb files %v, want %v", got, packaged)
	}
	fields := run(t, "dpkg-deb", "-f", deb, "Version", "Depends")
	// The .rpm.
	got = map[string]os.FileMode{}
	for _, line := range strings.Split(strings.TrimSpace(run(t, "rpm", "-qp", "--qf", "[%{FILEMODES:perms} %{FILENAMES}\n]", rpmFile)), "\n") {
		perms, name, _ := strings.Cut(line, " ")
		got[name] = permOf(t, perms)
	}
	if want := packagedRPM(); !maps.Equal(got, want) {
		t.Errorf(".rpm files %v, want %v", got, want)
	}
	if req := run(t, "rpm", "-qp", "--requires", rpmFile); !strings.Contains(req, "fuse3") {
		t.Errorf("the .rpm does not require fuse3:\n%s", req)
	}

	root := t.TempDir()
	run(t, "dpkg-deb", "-x", deb, root)
	bin := filepath.Join(root, "usr/bin/segfs")
	version := strings.TrimSpace(run(t, bin, "--version"))
	pkgVersion := ""
	for _, line := range strings.Split(fields, "\n") {
		if v, ok := strings.CutPrefix(line, "Version: "); ok {
			pkgVersion = strings.TrimSuffix(v, "-1") // the package's release
		}
		if d, ok := strings.CutPrefix(line, "Depends: "); ok && !strings.Contains(d, "fuse3") {
			t.Errorf("the .deb depends on %q, not fuse3", d)
		}
	}
	if pkgVersion == "" || !strings.HasPrefix(version, "segfs "+pkgVersion+" ") {
		t.Errorf("segfs --version says %q; the package is version %q", version, pkgVersion)
	}
	exe, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	repo, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	modcache := strings.TrimSpace(run(t, "go", "env", "GOMODCACHE"))
	for _, p := range []string{repo, modcache, os.TempDir() + "/go-build"} {
		if bytes.Contains(exe, []byte(p)) {
			t.Errorf("the packaged binary holds the build path %s", p)
		}
	}
	unit, err := os.ReadFile(filepath.Join(root, "usr/lib/systemd/system/segfs@.service"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\nExecStart=/usr/bin/segfs mount ", "\nExecStopPost=-/usr/bin/segfs unmount --lazy ", "\nType=notify\n", "/usr/share/doc/segfs/examples/segfs.env.example"} {
		if !bytes.Contains(unit, []byte(want)) {
			t.Errorf("the unit lacks %q", want)
		}
	}
	if bytes.Contains(unit, []byte("@BINDIR@")) || bytes.Contains(unit, []byte("@DOCDIR@")) {
		t.Error("the unit holds a placeholder make install did not fill")
	}
	checkManPage(t, filepath.Join(root, "usr/share/man/man8/segfs.8.gz"))

	// make install into a DESTDIR: the same files, the same bytes.
	dest := t.TempDir()
	makeIn(t, repo, "install", "DESTDIR="+dest, "PREFIX=/usr", "UNITDIR=/usr/lib/systemd/system", "ZSHCOMPDIR=/usr/share/zsh/vendor-completions")
	installed := map[string]os.FileMode{}
	err = filepath.WalkDir(dest, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(p, dest)
		installed[name] = info.Mode().Perm()
		if a, b := sum(t, p), sum(t, filepath.Join(root, name)); a != b {
			t.Errorf("make install's %s differs from the package's", name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(installed, packaged) {
		t.Errorf("make install wrote %v, want the package's %v", installed, packaged)
	}
	makeIn(t, repo, "uninstall", "DESTDIR="+dest, "PREFIX=/usr", "UNITDIR=/usr/lib/systemd/system", "ZSHCOMPDIR=/usr/share/zsh/vendor-completions")
	_ = filepath.WalkDir(dest, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			t.Errorf("make uninstall left %s", strings.TrimPrefix(p, dest))
		}
		return nil
	})

	// A second build of the packages, elsewhere: the same bytes.
	again := t.TempDir()
	makeIn(t, repo, "package", "PKGDIR="+filepath.Join(again, "pkg"), "PKG_STAGE="+filepath.Join(again, "stage"))
	for _, p := range []string{deb, rpmFile} {
		if a, b := sum(t, p), sum(t, filepath.Join(again, "pkg", filepath.Base(p))); a != b {
			t.Errorf("%s: a second make package gives other bytes", filepath.Base(p))
		}
	}
}

// makeIn runs make in dir with args.
func makeIn(t *testing.T, dir string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "make", append([]string{"--no-print-directory", "-C", dir}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// checkManPage renders the gzipped page: man(1) formats it with no
// warning, with a section for each command.
func checkManPage(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	page, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"MOUNT", "UNMOUNT", "STATUS", "WARM", "RESTORE", "VERIFY", "PUSH", "SNAPSHOTS", "COMPLETION"} {
		if !bytes.Contains(page, []byte(".SH SEGFS "+cmd+"\n")) {
			t.Errorf("the man page has no section for segfs %s", strings.ToLower(cmd))
		}
	}
	if groff, err := exec.LookPath("groff"); err == nil {
		cmd := exec.Command(groff, "-man", "-ww", "-z")
		cmd.Stdin = bytes.NewReader(page)
		if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
			t.Errorf("groff warns of the man page: %v\n%s", err, out)
		}
	}
}

// TestPackageInstall installs the .deb as an operator does, mounts a
// bucket with `mount -t fuse.segfs` and with a line of /etc/fstab, each
// through the /usr/bin/segfs that mount.fuse3's shell finds on the
// default PATH, reads it byte-exact, unmounts, and removes the package:
// none of its files is left.
func TestPackageInstall(t *testing.T) {
	deb, _ := needPackages(t)
	if os.Geteuid() != 0 {
		harness.SkipOrFail(t, fmt.Errorf("installing a package needs root"))
	}
	if out, err := exec.Command("dpkg-query", "-W", "-f=${Status}", "fuse3").CombinedOutput(); err != nil || string(out) != "install ok installed" {
		harness.SkipOrFail(t, fmt.Errorf("the fuse3 package, which segfs depends on, is not installed: %q %v", out, err))
	}
	if out, err := exec.Command("dpkg-query", "-W", "segfs").CombinedOutput(); err == nil {
		t.Fatalf("a segfs package is installed already (%s): remove it first (dpkg --purge segfs)", bytes.TrimSpace(out))
	}
	for name := range packaged {
		if _, err := os.Lstat(name); err == nil {
			t.Fatalf("%s exists before the package is installed: the test would remove it", name)
		}
	}
	srv := needServer(t)
	bucket := newBucket(t, srv)
	data := randomBytes(45, 2<<20+777)
	small := []byte("segments_1 of a shard\n")
	ctx := context.Background()
	if _, err := srv.PutBytes(ctx, bucket, "shard/_0.cfs", data); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.PutBytes(ctx, bucket, "shard/segments_1", small); err != nil {
		t.Fatal(err)
	}

	// Purged at the end whatever happens, even after a failed install
	// (dpkg unpacks before it checks dependencies); purging a package
	// that is not installed does nothing.
	t.Cleanup(func() {
		if out, err := exec.Command("dpkg", "--purge", "segfs").CombinedOutput(); err != nil {
			t.Errorf("dpkg --purge segfs: %v\n%s", err, out)
		}
	})
	run(t, "dpkg", "-i", deb)
	if found := strings.TrimSpace(run(t, "env", "-u", "PATH", "/bin/sh", "-c", "command -v segfs")); found != "/usr/bin/segfs" {
		t.Fatalf("a shell with the default PATH finds segfs at %q, not the package's /usr/bin/segfs", found)
	}
	if out := run(t, "/usr/bin/segfs", "completion", "bash"); !strings.Contains(out, "complete ") {
		t.Errorf("the installed segfs prints no bash completion")
	}
	// The unit as installed, an instance of it reading a copy of the
	// installed example: systemd-analyze finds nothing wrong. (Starting
	// it needs systemd running as init, which the test machines lack.)
	if analyze, err := exec.LookPath("systemd-analyze"); err != nil {
		harness.SkipOrFail(t, fmt.Errorf("systemd-analyze is not installed (make pkgtools): %w", err))
	} else {
		unit, err := os.ReadFile("/usr/lib/systemd/system/segfs@.service")
		if err != nil {
			t.Fatal(err)
		}
		example, err := os.ReadFile("/usr/share/doc/segfs/examples/segfs.env.example")
		if err != nil {
			t.Fatal(err)
		}
		tmp := t.TempDir()
		envFile := filepath.Join(tmp, "test.env")
		if err := os.WriteFile(envFile, example, 0o600); err != nil {
			t.Fatal(err)
		}
		text := strings.ReplaceAll(string(unit), "/etc/segfs/%i.env", envFile)
		if c := verifyUnit(t, analyze, filepath.Join(tmp, "segfs@test.service"), text); len(c) > 0 {
			t.Errorf("systemd-analyze verify complains about the installed unit:\n%s", strings.Join(c, "\n"))
		}
	}

	opts := func(cache string) string {
		return fmt.Sprintf("ro,_netdev,endpoint=%s,path_style,region=%s,cache_dir=%s", srv.Endpoint(), harness.Region, cache)
	}
	e := sharedMountEnv(t, "/usr/bin/segfs")
	for _, c := range []struct {
		name string
		args func(dir string) []string
	}{
		{"mount -t", func(dir string) []string {
			return []string{"mount", "-t", "fuse.segfs", "s3://" + bucket, dir, "-o", opts(filepath.Join(t.TempDir(), "cache"))}
		}},
		{"fstab line", func(dir string) []string {
			// mount(8) reads /etc/fstab: in a mount namespace of the
			// test's own, a file holding the line is bound over it (the
			// host's /etc/fstab is never touched), and `mount DIR` finds
			// the line there. The mountpoint is in a shared mount, so the
			// FUSE mount made in that namespace shows in the test's.
			fstab := filepath.Join(t.TempDir(), "fstab")
			line := fmt.Sprintf("s3://%s %s fuse.segfs %s 0 0\n", bucket, dir, opts(filepath.Join(t.TempDir(), "cache")))
			if err := os.WriteFile(fstab, []byte(line), 0o644); err != nil {
				t.Fatal(err)
			}
			return []string{"unshare", "--mount", "--propagation", "unchanged", "--", "/bin/sh", "-c", `set -e
mount --make-private "$(findmnt -n -o TARGET -T /etc/fstab)"
mount --bind "$1" /etc/fstab
exec mount "$2"`, "sh", fstab, dir}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := e.newMountpoint(t)
			logPath := filepath.Join(t.TempDir(), "mount.log")
			logf, err := os.Create(logPath)
			if err != nil {
				t.Fatal(err)
			}
			defer logf.Close()
			mctx, cancel := context.WithTimeout(context.Background(), helperTimeout)
			defer cancel()
			args := c.args(dir)
			cmd := exec.CommandContext(mctx, args[0], args[1:]...)
			cmd.Env = harness.ChildEnv(srv.Env()...)
			cmd.Stdout, cmd.Stderr = logf, logf // the daemon keeps them: no pipe to wait on
			if err := cmd.Run(); err != nil {
				b, _ := os.ReadFile(logPath)
				t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, b)
			}
			for name, want := range map[string][]byte{"shard/_0.cfs": data, "shard/segments_1": small} {
				got, err := os.ReadFile(filepath.Join(dir, name))
				if err != nil || !bytes.Equal(got, want) {
					t.Errorf("%s: %d bytes (%v), want the %d uploaded", name, len(got), err, len(want))
				}
			}
			pids := e.daemons(dir)
			if len(pids) != 1 {
				t.Fatalf("want one /usr/bin/segfs serving %s, found %v", dir, pids)
			}
			umountDaemon(t, dir, pids[0])
		})
	}

	// An instance enabled as systemctl enable leaves it: the removal
	// disables it (the package's prerm), so no link is left to a unit
	// that is gone.
	wants := "/etc/systemd/system/multi-user.target.wants"
	madeWants := false
	if _, err := os.Stat(wants); err != nil {
		if err := os.MkdirAll(wants, 0o755); err != nil {
			t.Fatal(err)
		}
		madeWants = true
	}
	link := filepath.Join(wants, "segfs@pkgtest.service")
	if err := os.Symlink("/usr/lib/systemd/system/segfs@.service", link); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		os.Remove(link)
		if madeWants {
			os.Remove(wants)
		}
	})
	run(t, "dpkg", "--purge", "segfs")
	if _, err := os.Lstat(link); err == nil {
		t.Errorf("the enabled instance's link %s is left after dpkg --purge", link)
	}
	for name := range packaged {
		if _, err := os.Lstat(name); err == nil {
			t.Errorf("%s is left after dpkg --purge", name)
		}
	}
	for _, dir := range []string{"/usr/share/doc/segfs"} {
		if _, err := os.Lstat(dir); err == nil {
			t.Errorf("the directory %s is left after dpkg --purge", dir)
		}
	}
}

// sharedMountEnv is a helperEnv for the installed bin: a shared bind
// mount to make mountpoints in, with no directory bound over the
// default PATH (mount.fuse3's shell must find the package's segfs).
func sharedMountEnv(t *testing.T, bin string) *helperEnv {
	t.Helper()
	for _, tool := range []string{"unshare", "findmnt"} {
		if _, err := exec.LookPath(tool); err != nil {
			harness.SkipOrFail(t, fmt.Errorf("%s is not installed: %w", tool, err))
		}
	}
	e := &helperEnv{bin: bin, shared: filepath.Join(t.TempDir(), "shared")}
	makeShared(t, e.shared)
	return e
}

// permOf parses an ls-style mode ("-rwxr-xr-x").
func permOf(t *testing.T, s string) os.FileMode {
	t.Helper()
	if len(s) != 10 {
		t.Fatalf("mode %q", s)
	}
	var m os.FileMode
	for i, c := range s[1:] {
		if c != '-' {
			m |= 1 << (8 - i)
		}
	}
	return m
}

func sum(t *testing.T, p string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}
