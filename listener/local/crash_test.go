package local_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wqhost/wqhost/internal/clock/clocktest"
	"github.com/wqhost/wqhost/listener/local"
	"github.com/wqhost/wqhost/listener/queue"
)

const (
	crashEnv   = "WQHOST_LOCAL_CRASH_CHILD"
	crashQueue = "crash"
	crashSends = 3000
)

// crashChild runs in the re-executed test binary: it enqueues messages and prints "S id" for
// each acknowledged send, then drains, printing "d id" before and "D id" after each delete, until
// the parent kills it.
func crashChild(path string) {
	ctx := context.Background()
	b, err := local.Open(ctx, path, local.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	q, _ := b.Queue(ctx, crashQueue)
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	emit := func(kind string, ids ...string) {
		mu.Lock()
		defer mu.Unlock()
		for _, id := range ids {
			fmt.Fprintf(out, "%s %s\n", kind, id)
		}
		// Flushed before the next queue call, so a printed id is always acknowledged.
		out.Flush()
	}
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < crashSends; i += 8 {
				id, err := q.Send(ctx, []byte(fmt.Sprint(i)), queue.SendOptions{})
				if err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(2)
				}
				emit("S", id)
			}
		}()
	}
	wg.Wait()
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				ms, err := q.Receive(ctx, 16, time.Minute)
				if err != nil || len(ms) == 0 {
					return
				}
				// Slow the drain down so the parent's kill lands in the middle of it.
				time.Sleep(time.Millisecond)
				intent := make([]string, len(ms))
				for i, m := range ms {
					intent[i] = m.ID
				}
				// A delete may commit and the kill land before its acknowledgement: the
				// parent accepts those ids as gone, and only those.
				emit("d", intent...)
				errs := q.DeleteBatch(ctx, ms)
				var ids []string
				for i, err := range errs {
					if err == nil {
						ids = append(ids, ms[i].ID)
					}
				}
				emit("D", ids...)
			}
		}()
	}
	wg.Wait()
	emit("DONE", "")
	select {}
}

// TestCrashDurability SIGKILLs a process in the middle of a drain and checks that the store,
// reopened, still holds every acknowledged message that no delete was attempted on, and none
// whose delete was acknowledged.
func TestCrashDurability(t *testing.T) {
	if p := os.Getenv(crashEnv); p != "" {
		crashChild(p)
		return
	}
	if testing.Short() {
		t.Skip("spawns a child process")
	}
	path := filepath.Join(t.TempDir(), "q.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashDurability$")
	cmd.Env = append(os.Environ(), crashEnv+"="+path)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sent, deleting, deleted := map[string]bool{}, map[string]bool{}, map[string]bool{}
	sc := bufio.NewScanner(stdout)
	killed := false
	for sc.Scan() {
		kind, id, _ := strings.Cut(sc.Text(), " ")
		switch kind {
		case "S":
			sent[id] = true
		case "d":
			deleting[id] = true
		case "D":
			deleted[id] = true
		case "DONE":
			t.Fatal("the child drained everything before it was killed; the test proves nothing")
		}
		if !killed && len(deleted) >= crashSends/3 {
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatalf("kill child: %v", err)
			}
			killed = true
		}
	}
	_ = cmd.Wait()
	if !killed {
		t.Fatalf("child exited before the kill (sent %d, deleted %d)", len(sent), len(deleted))
	}
	if len(sent) != crashSends {
		t.Fatalf("child acknowledged %d sends, want %d", len(sent), crashSends)
	}

	// Reopen an hour later so every lease the dead process held has expired.
	later := time.Now().Add(time.Hour)
	b := openStore(t, path, local.Options{Clock: clocktest.New(later)})
	q, _ := b.Queue(context.Background(), crashQueue)
	remaining := map[string]bool{}
	for {
		ms, err := q.Receive(context.Background(), queue.MaxBatch, time.Hour)
		if err != nil {
			t.Fatalf("Receive after crash: %v", err)
		}
		if len(ms) == 0 {
			break
		}
		for _, m := range ms {
			if remaining[m.ID] {
				t.Fatalf("message %s received twice after the crash", m.ID)
			}
			remaining[m.ID] = true
		}
	}
	for id := range sent {
		if !deleting[id] && !remaining[id] {
			t.Errorf("acknowledged message %s, never deleted, is lost", id)
		}
	}
	for id := range remaining {
		if deleted[id] {
			t.Errorf("message %s acknowledged as deleted came back", id)
		}
		if !sent[id] {
			t.Errorf("message %s was never sent", id)
		}
	}
	t.Logf("sent %d, deleted before kill %d, remaining %d", len(sent), len(deleted), len(remaining))
}
