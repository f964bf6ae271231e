package restore

import (
	"os"
	"sync"
	"time"

	"github.com/segfs/segfs/entry"
)

// File is one file of the source and its restore: planned (Plan), then
// checked against DEST_DIR and written by a Dest.
type File struct {
	entry    entry.Entry
	size     int64
	expected *uint64 // the checksum the layout's metadata records, if any
	// temp is the name, relative to DEST_DIR, of the temporary file
	// entry.Name is written to (tempName).
	temp string

	// Guarded by mu while the file is written.
	mu sync.Mutex
	f  *os.File // the temporary file, open from its first piece to its last
	// direct is the temporary file opened again with O_DIRECT, for the
	// whole 4096-byte blocks of aligned pieces; nil where the file
	// system refuses it.
	direct *os.File
	left   int   // pieces not yet done
	err    error // the first failure
	// interrupted: err was recorded once the restore's context had ended.
	interrupted bool
	refused     error // set by Plan: the file fails without a fetch
	done        bool  // renamed into place, or given up and its temporary file removed
	created     bool  // its temporary file was created by this run
	start       time.Time
	// reserved is what of the file's size is not written yet, counted
	// in the restorer's pending; guarded by the restorer's mu.
	reserved int64
}

// piece is one unit of work: bytes [off, off+n) of a file, fetched and
// written at their offset. A plain object's pieces are its aligned parts;
// a seekable zstd file is one piece read in order through one handle (its
// logical ranges do not follow its compressed parts, and a sequential
// read lets the engine fetch each compressed part once, ahead of the
// decodes, as it does for a copy out of a mount); an inline file is one
// piece written from memory.
type piece struct {
	f      *File
	off, n int64
}

// Summary is what a restore did.
type Summary struct {
	Files         int // files of the source
	Restored      int // renamed into place by this run
	RestoredBytes int64
	Skipped       int // present and verified already
	SkippedBytes  int64
	Failed        []Failed // by name
	Took          time.Duration
	// The store's counters: GETs, their bytes and the retries.
	Gets, GetBytes, Retries int64
}

// Failed is a file that failed, and why.
type Failed struct {
	Name string
	Err  error
}

// Size is the file's size as the source lists it.
func (f *File) Size() int64 { return f.size }
