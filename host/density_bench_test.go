package host

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wqhost/wqhost/host/config"
	"github.com/wqhost/wqhost/listener/queue"
)

// BenchmarkDensity is issue 19's harness: N bindings of the TinyGo echo module over N/100
// tenants on the local backend with push, defaults otherwise. For each size it prints
//
//	density n=N: ready=Ss rss=MMiB idle_push_calls_per_hour=C cold_p50=Tms rss_idle=MMiB goroutines=G
//
// ready is the time to build and start the host; rss the process's resident set then;
// idle_push_calls_per_hour the queue calls of every binding over an idle window, per hour;
// cold_p50 the time from sending one message to a binding that holds no instance to its
// output; rss_idle the resident set after WQHOST_DENSITY_IDLE (default 2m) without work
// (after debug.FreeOSMemory: what the host holds, not what the Go runtime has yet to return);
// goroutines is counted once the start has settled. WQHOST_DENSITY_SIZES (default
// 1000,10000) picks the sizes.
// Run: go test -run '^$' -bench Density -timeout 30m ./host/
func BenchmarkDensity(b *testing.B) {
	idle, sizes := 2*time.Minute, []int{1000, 10000}
	if testing.Short() {
		// CI's smoke run (every benchmark once): one small host, a short idle wait.
		idle, sizes = time.Second, []int{100}
	}
	if v := os.Getenv("WQHOST_DENSITY_IDLE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatalf("WQHOST_DENSITY_IDLE: %v", err)
		}
		idle = d
	}
	if v := os.Getenv("WQHOST_DENSITY_SIZES"); v != "" {
		sizes = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(f)
			if err != nil {
				b.Fatalf("WQHOST_DENSITY_SIZES: %v", err)
			}
			sizes = append(sizes, n)
		}
	}
	for _, n := range sizes {
		b.Run(fmt.Sprint("n=", n), func(b *testing.B) {
			for b.Loop() {
				// One measurement per size; b.N is irrelevant.
			}
			measureDensity(b, n, idle)
		})
	}
}

func measureDensity(b *testing.B, n int, idle time.Duration) {
	tenants := max(1, n/100)
	var y strings.Builder
	dir := b.TempDir()
	fmt.Fprintf(&y, "data_dir: %s\ncache_dir: %s\nadmin: {addr: \"off\"}\ntenants:\n", filepath.Join(dir, "data"), cacheDir)
	for t := range tenants {
		fmt.Fprintf(&y, "  t%d:\n    bindings:\n", t)
		for i := t; i < n; i += tenants {
			fmt.Fprintf(&y, "      b%d: {queue: q%d, output: o%d, module: 'builtin:echo-tinygo', push: true}\n", i, i, i)
		}
	}
	begin := time.Now()
	cfg, err := config.Parse([]byte(y.String()), dir)
	if err != nil {
		b.Fatal(err)
	}
	h, err := New(context.Background(), cfg, testLogger(b))
	if err != nil {
		b.Fatal(err)
	}
	stop := run(b, h)
	defer func() { _ = stop() }()
	ready := time.Since(begin)
	rss := rssMiB(b)

	calls := func() QueueCalls {
		var sum QueueCalls
		for _, ts := range h.Status(context.Background()).Tenants {
			for _, bs := range ts.Bindings {
				c := bs.QueueCalls
				sum.Receives += c.Receives
				sum.Deletes += c.Deletes
				sum.Updates += c.Updates
				sum.Sends += c.Sends
				sum.DepthQueries += c.DepthQueries
			}
		}
		return sum
	}
	total := func(c QueueCalls) uint64 { return c.Receives + c.Deletes + c.Updates + c.Sends + c.DepthQueries }
	// The listeners' first receives and depth reads follow the start: idle begins once two
	// seconds pass without a call (a minute at most).
	for last, quiet, t0 := total(calls()), 0, time.Now(); quiet < 2 && time.Since(t0) < time.Minute; {
		time.Sleep(time.Second)
		if c := total(calls()); c != last {
			last, quiet = c, 0
		} else {
			quiet++
		}
	}
	goroutines := goruntime.NumGoroutine()
	window := 10 * time.Second
	if testing.Short() {
		window = 2 * time.Second
	}
	before := calls()
	time.Sleep(window)
	after := calls()
	idleCalls := float64(total(after)-total(before)) * float64(time.Hour) / float64(window)
	b.Logf("idle window %s: receives %d, depth queries %d, other %d", window, after.Receives-before.Receives,
		after.DepthQueries-before.DepthQueries, total(after)-total(before)-(after.Receives-before.Receives)-(after.DepthQueries-before.DepthQueries))

	// Cold first messages: bindings that never ran hold no instance.
	var lat []time.Duration
	for k := range min(n, 50) {
		i := k * (n / min(n, 50))
		tn := fmt.Sprint("t", i%tenants)
		q, err := h.OpenQueue(context.Background(), tn, fmt.Sprint("q", i))
		if err != nil {
			b.Fatal(err)
		}
		out, err := h.OpenQueue(context.Background(), tn, fmt.Sprint("o", i))
		if err != nil {
			b.Fatal(err)
		}
		s := time.Now()
		if _, err := q.Send(context.Background(), []byte("cold"), queue.SendOptions{}); err != nil {
			b.Fatal(err)
		}
		_ = h.Notify(tn, fmt.Sprint("q", i))
		for {
			d, err := out.Depth(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			if d > 0 {
				break
			}
			if time.Since(s) > time.Minute {
				b.Fatalf("binding %s/b%d: no output after a minute", tn, i)
			}
			time.Sleep(100 * time.Microsecond)
		}
		lat = append(lat, time.Since(s))
	}
	slices.Sort(lat)
	time.Sleep(idle)
	// What the host needs, not what the Go runtime has yet to give back to the OS.
	debug.FreeOSMemory()
	fmt.Printf("density n=%d: ready=%.1fs rss=%dMiB idle_push_calls_per_hour=%.0f cold_p50=%.2fms rss_idle=%dMiB goroutines=%d\n",
		n, ready.Seconds(), rss, idleCalls, float64(lat[len(lat)/2].Microseconds())/1000, rssMiB(b), goroutines)
}

// rssMiB is the process's resident set (VmRSS), in MiB.
func rssMiB(b *testing.B) int {
	f, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(f))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			if err != nil {
				b.Fatal(err)
			}
			return kb >> 10
		}
	}
	b.Fatal("no VmRSS in /proc/self/status")
	return 0
}
