package push

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/segfs/segfs/compress"
)

// memObject is one stored object of a memTarget.
type memObject struct {
	data []byte
	meta map[string]string
}

// memTarget is an in-memory store with S3's semantics: put makes an
// object visible only once its whole body was read without error and
// ctx is live; upToDate compares the metadata. Hooks let a test act at
// the points push reaches.
type memTarget struct {
	mu      sync.Mutex
	objs    map[string]memObject // guarded by mu
	puts    []string             // keys put, in order; guarded by mu
	removes []string             // keys removed, in order; guarded by mu

	// Set before the run, read-only during it.
	beforeCheck func(key string)      // called by upToDate, after push hashed the file
	failPut     map[string]error      // put of these keys fails with the error
	failRemove  map[string]error      // remove of these keys fails
	duringPut   func(key string)      // called by put after reading the first bytes
	listErr     error                 // list fails with it
	putStarted  chan<- string         // if set, receives each key as its put starts
	holdPut     map[string]<-chan any // put of these keys waits for the channel or ctx
}

func newMemTarget() *memTarget { return &memTarget{objs: map[string]memObject{}} }

func (m *memTarget) String() string { return "mem://" }

func (m *memTarget) list(ctx context.Context) ([]string, error) {
	if m.listErr != nil {
		return nil, m.listErr
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Sorted(maps.Keys(m.objs)), nil
}

func (m *memTarget) upToDate(ctx context.Context, key string, size int64, sha string, _ bool) (bool, error) {
	if m.beforeCheck != nil {
		m.beforeCheck(key)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.objs[key]
	return ok && o.meta[MetaSHA256] == sha && o.meta[MetaSize] == strconv.FormatInt(size, 10), nil
}

func (m *memTarget) put(ctx context.Context, key string, r io.Reader, size int64, meta map[string]string) error {
	if m.putStarted != nil {
		m.putStarted <- key
	}
	if err := m.failPut[key]; err != nil {
		return err
	}
	var buf bytes.Buffer
	if _, err := io.CopyN(&buf, r, 1); err != nil && err != io.EOF {
		return err
	}
	if m.duringPut != nil {
		m.duringPut(key)
	}
	if hold := m.holdPut[key]; hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
		}
	}
	if _, err := io.Copy(&buf, r); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if int64(buf.Len()) != size {
		return fmt.Errorf("mem put %s: %d bytes, want %d", key, buf.Len(), size)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.objs[key] = memObject{data: buf.Bytes(), meta: maps.Clone(meta)}
	m.puts = append(m.puts, key)
	return nil
}

func (m *memTarget) remove(ctx context.Context, key string) error {
	if err := m.failRemove[key]; err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.objs, key)
	m.removes = append(m.removes, key)
	return nil
}

func (m *memTarget) keys() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Sorted(maps.Keys(m.objs))
}

func (m *memTarget) get(key string) (memObject, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.objs[key]
	return o, ok
}

func (m *memTarget) putKeys() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.puts)
}

func (m *memTarget) removedKeys() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.removes)
}

// decodeObject decodes a whole seekable zstd object, checking every
// frame's checksum.
func decodeObject(t *testing.T, obj []byte) []byte {
	t.Helper()
	tab, err := compress.ParseSeekTable(obj, int64(len(obj)))
	if err != nil {
		t.Fatalf("seek table: %v", err)
	}
	d, err := compress.NewDecoder()
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var out []byte
	for _, f := range tab.Frames {
		if !f.HasChecksum {
			t.Errorf("%v has no checksum", f)
		}
		data, err := d.DecodeFrame(f, obj[f.CompOff:f.CompOff+f.CompSize], nil)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, data...)
	}
	return out
}
