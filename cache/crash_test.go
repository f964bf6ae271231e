package cache

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
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

// TestCrashDuringPuts kills a process that is writing parts (SIGKILL: no
// deferred cleanup runs) and checks, after each kill, that the next Open
// sweeps the temporary files, that the index matches the disk, and that
// every part present reads back exactly. Each kill comes at a random
// moment after the child was seen writing a part; a kill between two
// Puts tests little, so the test goes on, up to crashMaxRuns kills, until
// crashWantMidWrite of them have left a part half written (its temporary
// file), and fails if they never did.
func TestCrashDuringPuts(t *testing.T) {
	if os.Getenv(crashEnv) != "" {
		t.Skip("in the child")
	}
	if testing.Short() {
		t.Skip("starts child processes")
	}
	dir := testConfig(t).Dir
	r := rand.New(rand.NewPCG(7, 7))
	var kills, midWrite, present, temps int
	for run := 0; run < crashMinRuns || midWrite < crashWantMidWrite && run < crashMaxRuns; run++ {
		killWriter(t, dir, run, time.Duration(r.IntN(20_000))*time.Microsecond)
		kills++
		_, _, tmp := diskUsage(t, dir)
		temps += tmp
		if tmp > 0 {
			midWrite++
		}

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
	t.Logf("%d kills, %d of them mid-write; %d temporary files left by them and swept; %d parts read back intact",
		kills, midWrite, temps, present)
	if midWrite < crashWantMidWrite {
		t.Errorf("%d of %d kills left a part half written, want %d: the crash the test is about did not happen",
			midWrite, kills, crashWantMidWrite)
	}
	if present == 0 {
		t.Errorf("no part survived the kills: nothing was read back")
	}
}

// The kills of TestCrashDuringPuts: at least crashMinRuns, and more, up to
// crashMaxRuns, until crashWantMidWrite of them came while a part was
// being written. Most do: 4 to 8 of the first 8 in the runs seen.
const (
	crashMinRuns      = 8
	crashMaxRuns      = 40
	crashWantMidWrite = 2
)

// killWriter starts TestCrashChild writing the parts of run into dir, waits
// until a temporary file shows that it is writing, waits delay more, and
// kills it with SIGKILL.
func killWriter(t *testing.T, dir string, run int, delay time.Duration) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashEnv+"="+dir, fmt.Sprintf("%s_RUN=%d", crashEnv, run))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.After(time.Minute)
	for writing := false; !writing; {
		select {
		case err := <-exited:
			t.Fatalf("run %d: the writer exited before it was killed: %v\n%s", run, err, out.String())
		case <-deadline:
			cmd.Process.Kill()
			<-exited
			t.Fatalf("run %d: the writer wrote no part within a minute", run)
		case <-time.After(time.Millisecond):
		}
		tmps, _ := filepath.Glob(filepath.Join(dir, "tmp", "*.tmp"))
		writing = len(tmps) > 0
	}
	time.Sleep(delay)
	cmd.Process.Kill()
	<-exited
}
