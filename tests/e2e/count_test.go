package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestCountingColdRead reads 4 KiB at a cold offset and checks that segfs
// counted the remote GETs it took. It logs the cost of the read; it asserts
// only that the read was fetched, not how efficiently.
func TestCountingColdRead(t *testing.T) {
	srv := needServer(t)
	bucket := newBucket(t, srv)
	const size = 64 << 20
	data := randomBytes(3, size)
	ctx := context.Background()
	if _, err := srv.PutBytes(ctx, bucket, "_0.fdt", data); err != nil {
		t.Fatal(err)
	}
	m := mountS3(t, srv, "s3://"+bucket)

	before, err := m.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"gets", "get_bytes", "retries", "reads", "read_bytes"} {
		if _, ok := before[k]; !ok {
			t.Errorf("stats lack %q: %v", k, before)
		}
	}
	f, err := os.Open(filepath.Join(m.Dir, "_0.fdt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const off = 40<<20 + 12345
	if err := comparePread(f, data, off, 4096); err != nil {
		t.Fatal(err)
	}
	after, err := m.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	delta := func(k string) int64 { return after[k] - before[k] }
	t.Logf("cold 4 KiB read at %d: %d GETs, %d bytes fetched, %d retries; %d FUSE reads of %d bytes",
		off, delta("gets"), delta("get_bytes"), delta("retries"), delta("reads"), delta("read_bytes"))
	if delta("gets") < 1 || delta("get_bytes") < 4096 {
		t.Errorf("stats moved by %d GETs and %d bytes; want at least 1 GET of 4096 bytes", delta("gets"), delta("get_bytes"))
	}
}
