package reader

import "github.com/segfs/segfs/entry"

// Entry is a file the engine reads (package entry): the name here keeps
// the engine's signatures short, since every read is of one.
type Entry = entry.Entry
