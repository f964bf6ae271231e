package restore

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"slices"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/segfs/segfs/entry"
	"github.com/segfs/segfs/fetcher"
)

// The plan of a restore and the checks of DEST_DIR before anything is
// written into it.

// Plan returns the files of entries (those a mount of the source shows)
// to restore, smallest first, then by name; checksums are those the
// layout's metadata records for them, by name. A file that
// cannot be restored as the source lists it (a size no object can have,
// a name in the form of restore's temporary names) is refused alone:
// it fails, named, and the others are restored.
func Plan(entries []entry.Entry, checksums map[string]uint64) []*File {
	files := make([]*File, 0, len(entries))
	for _, e := range entries {
		f := &File{entry: e, size: e.Size(), temp: tempName(e.Name)}
		// A size no object can have (a listing's lie) fails its file
		// alone, before its piece count could overflow; it is neither
		// checked nor fetched.
		if n := f.size; n < 0 || n > fetcher.MaxObjectSize {
			f.refused = fmt.Errorf("the source lists it with %d bytes, more than an object holds (%d) or less than none", n, int64(fetcher.MaxObjectSize))
			f.size = 0
		}
		// A name restore would take for a temporary file: it could be
		// another file's (tempName), and DEST_DIR's check could not tell
		// the two apart.
		if c := tempComponent(e.Name); c != "" {
			f.refused = fmt.Errorf("%s has the form of the names segfs restore writes files to before renaming them (.NAME%s): it cannot be restored", c, tempSuffix)
			f.size = 0
		}
		// segments_N of a layout is its metadata's bytes, not the blob
		// the metadata's checksum is of.
		if sum, ok := checksums[e.Name]; ok && e.Inline == nil {
			f.expected = &sum
		}
		files = append(files, f)
	}
	sort.SliceStable(files, func(i, j int) bool {
		if files[i].size != files[j].size {
			return files[i].size < files[j].size
		}
		return files[i].entry.Name < files[j].entry.Name
	})
	return files
}

// tempName returns the name, relative to DEST_DIR and '/'-separated, of
// the temporary file name is written to before it is renamed into place:
// in name's own directory, so that the rename never crosses a file
// system, and hidden: ".BASE.segfs-restore", or for a base too long for
// that, a hash of it in its place.
func tempName(name string) string {
	dir, base := path.Split(name)
	t := "." + base + tempSuffix
	if len(t) > maxNameLen {
		sum := sha256.Sum256([]byte(base))
		t = "." + hex.EncodeToString(sum[:16]) + tempSuffix
	}
	return dir + t
}

// isTempForm reports whether base has the form of a temporary file's
// name (tempName).
func isTempForm(base string) bool {
	return len(base) > len(tempSuffix)+1 && base[0] == '.' && strings.HasSuffix(base, tempSuffix)
}

// tempComponent returns the first component of name (a directory or
// its base) in the form of a temporary file's name, "" if none is.
func tempComponent(name string) string {
	for c := range strings.SplitSeq(name, "/") {
		if isTempForm(c) {
			return c
		}
	}
	return ""
}

// dirsOf returns every directory the files' names imply, '/'-separated
// and relative to DEST_DIR, DEST_DIR itself not included.
func dirsOf(files []*File) map[string]bool {
	dirs := map[string]bool{}
	for _, f := range files {
		for d := path.Dir(f.entry.Name); d != "." && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	return dirs
}

// lockDest takes an exclusive lock of DEST_DIR for the restore's time
// (until dd is closed), so that two restores never write into one
// directory at once.
func lockDest(dd *destDir) error {
	// Non-blocking: it never sleeps, so no signal interrupts it.
	err := unix.Flock(dd.fd(), unix.LOCK_EX|unix.LOCK_NB)
	switch {
	case err == unix.EWOULDBLOCK:
		return fmt.Errorf("DEST_DIR %s: another segfs restore is writing into it", dd.path)
	case err != nil:
		return fmt.Errorf("DEST_DIR %s: lock: %w", dd.path, err)
	}
	return nil
}

// destXattr names the source a DEST_DIR holds a restore of, on the
// directory itself: no file in it, which an index would hold as its own.
const destXattr = "user.segfs.restore"

// lostFound is the directory mkfs makes at a file system's root.
const lostFound = "lost+found"

// destMark is what DEST_DIR's destXattr says.
type destMark struct {
	value     string
	has       bool // the attribute is there
	supported bool // the file system keeps user extended attributes
}

// readMark reads DEST_DIR's destXattr through its descriptor.
func readMark(dd *destDir) (destMark, error) {
	buf := make([]byte, 4096)
	n, err := unix.Fgetxattr(dd.fd(), destXattr, buf)
	switch {
	case err == nil:
		return destMark{value: string(buf[:n]), has: true, supported: true}, nil
	case errors.Is(err, unix.ENOTSUP):
		return destMark{}, nil
	case errors.Is(err, unix.ENODATA):
		return destMark{supported: true}, nil
	case errors.Is(err, unix.ERANGE): // longer than any mark restore writes
		return destMark{value: "(an attribute of over 4096 bytes)", has: true, supported: true}, nil
	}
	return destMark{}, fmt.Errorf("DEST_DIR %s: read %s: %w", dd.path, destXattr, err)
}

// destEntries are the entries below DEST_DIR that no file of the
// source is, nor a directory one is in, nor a temporary file of one:
// files and directories, each list in the order of the walk (a
// directory before what is in it).
type destEntries struct {
	files []string
	dirs  []string
	// first is the first of them met, as a message names it.
	first string
}

// examineDest checks DEST_DIR before anything is written into it, and
// returns what it holds that the source does not have. DEST_DIR is
// taken when it is empty (but for an empty lost+found at its top), or
// when it holds only the files of an earlier restore of id, marked so
// by destXattr; it is then marked as a restore of id. Entries the
// source does not have are allowed only in a DEST_DIR marked for id:
// an earlier restore of the source as it was then (a refresh, a merge
// drop files). A symlink, a special file or a non-empty lost+found is
// refused anywhere. On a file system without user extended attributes,
// the names of the entries are the only check. The error of a refusal
// says that nothing was written.
func examineDest(dd *destDir, files []*File, id string, log *slog.Logger) (destEntries, error) {
	mark, err := readMark(dd)
	if err != nil {
		return destEntries{}, err
	}
	owned := mark.has && mark.value == id
	extra, empty, err := checkDest(dd, files)
	if err != nil {
		return destEntries{}, err
	}
	switch {
	case owned:
		return extra, nil
	case mark.has && !empty:
		return destEntries{}, fmt.Errorf("DEST_DIR %s holds a restore of %s, not of %s: nothing was written", dd.path, mark.value, id)
	case len(extra.files)+len(extra.dirs) > 0:
		return destEntries{}, fmt.Errorf("DEST_DIR %s holds %s: segfs restore writes only into an empty directory or one holding an earlier restore of the same source; nothing was written", dd.path, extra.first)
	case !mark.supported:
		log.Debug("DEST_DIR's file system keeps no extended attributes: it is checked by its files' names alone", "dest", dd.path)
		return destEntries{}, nil
	case !empty:
		return destEntries{}, fmt.Errorf("DEST_DIR %s is not empty and no segfs restore wrote it (it has no %s attribute): restore into an empty directory, or, if it holds files of this source, mark it with `setfattr -n %s -v %q %s`; nothing was written", dd.path, destXattr, destXattr, id, dd.path)
	}
	if err := unix.Fsetxattr(dd.fd(), destXattr, []byte(id), 0); err != nil && !errors.Is(err, unix.ENOTSUP) {
		return destEntries{}, fmt.Errorf("DEST_DIR %s: mark it as a restore of %s: %w", dd.path, id, err)
	}
	return destEntries{}, nil
}

// checkDest walks DEST_DIR (only reading) and returns the entries that
// are not the source's, and whether DEST_DIR holds nothing at all (an
// empty lost+found at its top aside). An entry is the source's when it
// is a regular file under the final or temporary name of one of files,
// or a directory one of them is in. A symlink, a special file anywhere,
// or a lost+found at the top with anything in it, is an error.
func checkDest(dd *destDir, files []*File) (extra destEntries, empty bool, err error) {
	ok := make(map[string]bool, 2*len(files))
	for _, f := range files {
		if f.refused == nil {
			ok[f.entry.Name] = true
			ok[f.temp] = true
		}
	}
	dirs := dirsOf(files)
	empty = true
	err = dd.Walk(func(name string, mode fs.FileMode) error {
		if name == lostFound && mode.IsDir() && !dirs[name] {
			// mkfs's, at a file system's root: never touched, and only
			// an empty one is taken as nothing.
			if n, err := dd.Names(name); err != nil || len(n) > 0 {
				return fmt.Errorf("DEST_DIR %s holds %s/ with files in it, which segfs restore neither writes into nor removes: restore into an empty directory; nothing was written", dd.path, lostFound)
			}
			return fs.SkipDir
		}
		empty = false
		switch {
		case mode.IsDir() && dirs[name]:
		case mode.IsDir():
			extra.dirs = append(extra.dirs, name)
			if extra.first == "" {
				extra.first = name + "/" + ", a directory no file of the source is in"
			}
		case mode.IsRegular() && ok[name]:
		case mode.IsRegular():
			extra.files = append(extra.files, name)
			if extra.first == "" {
				extra.first = name + ", a file the source does not have"
			}
		case mode&fs.ModeSymlink != 0:
			return fmt.Errorf("DEST_DIR %s holds %s, a symbolic link, not a regular file: segfs restore never writes through or removes one; nothing was written", dd.path, name)
		default:
			return fmt.Errorf("DEST_DIR %s holds %s, a special file, not a regular file: segfs restore never writes through or removes one; nothing was written", dd.path, name)
		}
		return nil
	})
	if err != nil {
		return destEntries{}, false, err
	}
	return extra, empty, nil
}

// removeExtra removes what an earlier restore of the source left that
// the source no longer has (examineDest), files first, then the
// directories, deepest first; with keep, it only logs them.
func removeExtra(dd *destDir, extra destEntries, keep bool, log *slog.Logger) error {
	if len(extra.files)+len(extra.dirs) == 0 {
		return nil
	}
	if keep {
		log.Info("DEST_DIR holds files of an earlier restore the source no longer has; kept (--keep-extra)", "files", len(extra.files), "dirs", len(extra.dirs))
		return nil
	}
	for _, n := range extra.files {
		if err := dd.Remove(n); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove %s, which the source no longer has: %w", dd.display(n), err)
		}
		log.Info("removed: the source no longer has it", "file", n)
	}
	for _, n := range slices.Backward(extra.dirs) { // what is in a directory comes after it
		if err := dd.RemoveDir(n); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove the directory %s, which no file of the source is in: %w", dd.display(n), err)
		}
		log.Info("removed: no file of the source is in it", "dir", n+"/")
	}
	return nil
}
