package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/segfs/segfs/tests/harness"
)

// TestCountingColdRead reads 4 KiB at a cold offset with no background
// prefetch and checks what it cost: one GET of just the kernel's request
// (the reader waits for nothing else), then one GET of the whole part in
// the background, which the next reads of that part are served from.
func TestCountingColdRead(t *testing.T) {
	srv := needServer(t)
	bucket := newBucket(t, srv)
	const size = 64 << 20
	data := randomBytes(3, size)
	ctx := context.Background()
	if _, err := srv.PutBytes(ctx, bucket, "_0.fdt", data); err != nil {
		t.Fatal(err)
	}
	m := mountS3(t, srv, "s3://"+bucket, "--prefetch", "none")

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
	after := harness.WaitIdle(t, m)
	delta := func(k string) int64 { return after[k] - before[k] }
	t.Logf("cold 4 KiB read at %d: %d GETs, %d bytes fetched, %d retries; %d FUSE reads of %d bytes; %d range GETs, %d part GETs",
		off, delta("gets"), delta("get_bytes"), delta("retries"), delta("reads"), delta("read_bytes"), delta("range_reads"), delta("parts_fetched"))
	const part = 8 << 20
	// The part's fetch finds the pool idle and splits into GETs of
	// --split-size (1 MiB) on eight workers.
	if delta("range_reads") != 1 || delta("parts_fetched") != 1 || delta("parts_split") != 1 ||
		delta("split_gets") != 8 || delta("gets") != 1+8 {
		t.Errorf("%d range GETs, %d parts fetched, %d split into %d GETs, %d GETs; want 1, 1, 1 into 8, and 9",
			delta("range_reads"), delta("parts_fetched"), delta("parts_split"), delta("split_gets"), delta("gets"))
	}
	if got, want := delta("get_bytes"), delta("read_bytes")+part; got != want {
		t.Errorf("%d bytes fetched; want the %d bytes the kernel asked for plus one %d-byte part", got, delta("read_bytes"), part)
	}
	// The rest of the part is now local: another random read in it (a new
	// descriptor, so that no readahead is started) costs no GET.
	g, err := os.Open(filepath.Join(m.Dir, "_0.fdt"))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := comparePread(g, data, off+100000, 4096); err != nil {
		t.Fatal(err)
	}
	if again := harness.WaitIdle(t, m); again["gets"] != after["gets"] {
		t.Errorf("a read of the cached part cost %d GETs", again["gets"]-after["gets"])
	}
}
