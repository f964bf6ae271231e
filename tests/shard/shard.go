package shard

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"

	"golang.org/x/sync/errgroup"
)

// ManifestName is the file, inside the shard directory, that holds the
// manifest. It is not part of the shard: upload Manifest.Names, not the
// whole directory.
const ManifestName = "shard-manifest.json"

// BigFileName names the optional extra file of Spec.BigFile bytes.
const BigFileName = "_big.bin"

// generatorVersion changes whenever the same Spec would yield other bytes,
// so that cached shards from an older generator are regenerated.
const generatorVersion = 1

// Spec describes a shard. The zero value is not valid: Scale and Segments
// must be positive.
type Spec struct {
	// Seed selects the content; the same Spec yields the same bytes.
	Seed int64 `json:"seed"`
	// Scale is the target total size in bytes of the segments (without
	// BigFile). Files scale with it; the result is within a few percent.
	Scale int64 `json:"scale"`
	// Segments is the number of segments, largest first (three split
	// 60/30/10; otherwise each is half the one before).
	Segments int `json:"segments"`
	// JSONStoredFields fills the stored-fields (.fdt) files with
	// compressible JSON lines of taxi-trip-like records instead of random
	// bytes.
	JSONStoredFields bool `json:"json_stored_fields"`
	// BigFile, when positive, adds one extra file of this many random
	// bytes, named BigFileName.
	BigFile int64 `json:"big_file,omitempty"`
}

// File is one generated file.
type File struct {
	// Name is the file's name inside the shard directory.
	Name string `json:"name"`
	// Size is its length in bytes.
	Size int64 `json:"size"`
	// SHA256 is the hex SHA-256 of its content.
	SHA256 string `json:"sha256"`
}

// Manifest lists a generated shard.
type Manifest struct {
	Version int    `json:"version"`
	Spec    Spec   `json:"spec"`
	Files   []File `json:"files"` // sorted by Name
}

// TotalSize is the sum of the files' sizes.
func (m Manifest) TotalSize() int64 {
	var n int64
	for _, f := range m.Files {
		n += f.Size
	}
	return n
}

// Names lists the files' names, sorted.
func (m Manifest) Names() []string {
	names := make([]string, len(m.Files))
	for i, f := range m.Files {
		names[i] = f.Name
	}
	return names
}

// BySize returns the files, largest first (ties by name).
func (m Manifest) BySize() []File {
	fs := slices.Clone(m.Files)
	slices.SortFunc(fs, func(a, b File) int {
		if c := cmp.Compare(b.Size, a.Size); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	return fs
}

// Largest returns the largest file. It panics on an empty manifest.
func (m Manifest) Largest() File {
	if len(m.Files) == 0 {
		panic("shard: Largest of an empty manifest")
	}
	return m.BySize()[0]
}

// Lookup returns the file called name.
func (m Manifest) Lookup(name string) (File, bool) {
	i, ok := slices.BinarySearchFunc(m.Files, name, func(f File, n string) int { return cmp.Compare(f.Name, n) })
	if !ok {
		return File{}, false
	}
	return m.Files[i], true
}

// Generate writes the shard described by spec into dir (created if needed)
// and returns its manifest, also written to dir/ManifestName. If dir
// already holds a manifest of the same spec and generator version whose
// files all have their listed sizes, Generate returns it without writing.
// Files of an older manifest that the new one does not list are removed;
// other files in dir are left alone. Files are written in parallel, one
// per CPU.
func Generate(dir string, spec Spec) (Manifest, error) {
	plans, err := plan(spec)
	if err != nil {
		return Manifest{}, err
	}
	if m, ok := cached(dir, spec); ok {
		return m, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Manifest{}, fmt.Errorf("shard: %w", err)
	}
	if err := removeOld(dir, plans); err != nil {
		return Manifest{}, err
	}
	m := Manifest{Version: generatorVersion, Spec: spec, Files: make([]File, len(plans))}
	// Largest first, so that the parallel writers finish together.
	order := make([]int, len(plans))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(plans[b].size, plans[a].size) })
	work := make(chan int)
	var g errgroup.Group
	for range runtime.GOMAXPROCS(0) {
		g.Go(func() error {
			buf := make([]byte, chunkSize)
			var firstErr error
			for i := range work {
				if firstErr != nil {
					continue // drain
				}
				sum, err := writeFile(filepath.Join(dir, plans[i].name), plans[i], spec.Seed, buf)
				m.Files[i] = File{Name: plans[i].name, Size: plans[i].size, SHA256: sum}
				firstErr = err
			}
			return firstErr
		})
	}
	for _, i := range order {
		work <- i
	}
	close(work)
	if err := g.Wait(); err != nil {
		return Manifest{}, fmt.Errorf("shard: %w", err)
	}
	if err := writeManifest(dir, m); err != nil {
		return Manifest{}, err
	}
	return m, nil
}

// Cached reports whether dir holds a complete shard of spec, which
// Generate would return without writing.
func Cached(dir string, spec Spec) bool {
	_, ok := cached(dir, spec)
	return ok
}

func cached(dir string, spec Spec) (Manifest, bool) {
	m, err := ReadManifest(dir)
	if err != nil || m.Version != generatorVersion || m.Spec != spec || !sizesMatch(dir, m) {
		return Manifest{}, false
	}
	return m, true
}

// removeOld deletes the manifest in dir and the files it lists that plans
// does not, so that an interrupted generation is never taken as complete.
func removeOld(dir string, plans []filePlan) error {
	old, err := ReadManifest(dir)
	if err != nil {
		return nil // nothing (readable) to clean up
	}
	if err := os.Remove(filepath.Join(dir, ManifestName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("shard: %w", err)
	}
	keep := make(map[string]bool, len(plans))
	for _, p := range plans {
		keep[p.name] = true
	}
	for _, f := range old.Files {
		if keep[f.Name] || f.Name != filepath.Base(f.Name) {
			continue
		}
		if err := os.Remove(filepath.Join(dir, f.Name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("shard: %w", err)
		}
	}
	return nil
}

func sizesMatch(dir string, m Manifest) bool {
	for _, f := range m.Files {
		st, err := os.Stat(filepath.Join(dir, f.Name))
		if err != nil || !st.Mode().IsRegular() || st.Size() != f.Size {
			return false
		}
	}
	return len(m.Files) > 0
}

// ReadManifest reads dir/ManifestName.
func ReadManifest(dir string) (Manifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if err != nil {
		return Manifest{}, fmt.Errorf("shard: %w", err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return Manifest{}, fmt.Errorf("shard: %s: %w", ManifestName, err)
	}
	return m, nil
}

func writeManifest(dir string, m Manifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("shard: %w", err)
	}
	tmp := filepath.Join(dir, ManifestName+".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("shard: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, ManifestName)); err != nil {
		return fmt.Errorf("shard: %w", err)
	}
	return nil
}

// HashFile returns the hex SHA-256 and the size of the file at path.
func HashFile(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	return HashReader(f)
}

// HashReader returns the hex SHA-256 of r's bytes and their count.
func HashReader(r io.Reader) (string, int64, error) {
	h := sha256.New()
	n, err := io.CopyBuffer(h, r, make([]byte, chunkSize))
	if err != nil {
		return "", n, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// Verify checks that every file of m is in dir with its size and SHA-256,
// hashing up to one file per CPU at a time. The error lists every
// mismatch.
func Verify(dir string, m Manifest) error {
	errs := make([]error, len(m.Files))
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i, f := range m.Files {
		g.Go(func() error {
			sum, n, err := HashFile(filepath.Join(dir, f.Name))
			switch {
			case err != nil:
				errs[i] = fmt.Errorf("%s: %w", f.Name, err)
			case n != f.Size:
				errs[i] = fmt.Errorf("%s: size %d, want %d", f.Name, n, f.Size)
			case sum != f.SHA256:
				errs[i] = fmt.Errorf("%s: sha256 %s, want %s", f.Name, sum, f.SHA256)
			}
			return nil
		})
	}
	g.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("shard: verify %s: %w", dir, err)
	}
	return nil
}
