package cache

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"testing"
	"time"
)

const crashEnv = "SEGFS_CACHE_CRASH_CHILD"

// TestCrashChild is the child of TestCrashDuringPuts: it Puts parts into
// the cache named by $SEGFS_CACHE_CRASH_CHILD until it is killed.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashEnv)
	if dir == "" {
		t.Skip("run by TestCrashDuringPuts")
	}
	// No t.TempDir: a killed child would leave it behind.
	cfg := Config{Dir: dir, MinFree: -1, MaxBytes: 40 * crashPart, Logger: quietLogger(), blockSize: testBlock}
	c, err := Open(cfg) // eviction runs too
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		k := crashKey(os.Getenv(crashEnv+"_RUN"), i)
		if err := c.Put(context.Background(), k, partData(k, crashPart)); err != nil {
			t.Fatal(err)
		}
	}
}

const crashPart = 256 << 10

func crashKey(run string, i int) Key {
	return Key{Source: "s3://b", Object: "crash/" + run, ETag: "e", PartSize: crashPart, Index: int64(i)}
}

// TestCrashDuringPuts kills a process that is writing parts at random
// moments (SIGKILL: no deferred cleanup runs) and checks, after each
// kill, that the next Open sweeps the temporary files, that the index
// matches the disk, and that every part present reads back exactly.
func TestCrashDuringPuts(t *testing.T) {
	if os.Getenv(crashEnv) != "" {
		t.Skip("in the child")
	}
	if testing.Short() {
		t.Skip("starts child processes")
	}
	dir := testConfig(t).Dir
	r := rand.New(rand.NewPCG(7, 7))
	var kills, present, temps int
	for run := range 8 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashEnv+"="+dir, fmt.Sprintf("%s_RUN=%d", crashEnv, run))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(100+r.IntN(300)) * time.Millisecond)
		cmd.Process.Kill()
		cmd.Wait()
		kills++
		_, _, tmp := diskUsage(t, dir)
		temps += tmp

		cfg := testConfig(t)
		cfg.Dir = dir
		c, err := Open(cfg)
		if err != nil {
			t.Fatalf("Open after kill %d: %v", run, err)
		}
		waitLoaded(t, c)
		if _, _, tmp := diskUsage(t, dir); tmp != 0 {
			t.Errorf("run %d: %d temporary files after Open", run, tmp)
		}
		checkAccounting(t, c)
		for prev := 0; prev <= run; prev++ {
			misses := 0
			for i := 0; misses < 50; i++ {
				k := crashKey(fmt.Sprint(prev), i)
				p := make([]byte, crashPart)
				n, ok, err := c.ReadAt(context.Background(), k, p, 0)
				if err != nil {
					t.Fatal(err)
				}
				if !ok {
					misses++
					continue
				}
				present++
				if !bytes.Equal(p[:n], partData(k, crashPart)) {
					t.Fatalf("run %d: part %d of run %d reads back wrong", run, i, prev)
				}
			}
		}
		if st := c.Stats(); st.CorruptRemoved != 0 {
			t.Errorf("run %d: %d corrupt parts after a kill (no power loss: there should be none)", run, st.CorruptRemoved)
		}
		c.Close()
	}
	t.Logf("%d kills; %d temporary files left by them and swept; %d parts read back intact", kills, temps, present)
}
