package memlimit

import (
	"os"
	"path/filepath"
	"testing"
)

func write(t *testing.T, p, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestDetect: the limit a host budgets from is the smallest of its cgroup's and its
// ancestors', in either cgroup version, as a container mounts them too; else the machine's.
func TestDetect(t *testing.T) {
	const meminfo = "MemTotal:       24576000 kB\nMemFree: 1 kB\n"
	for _, tc := range []struct {
		name   string
		cgroup string
		files  map[string]string
		want   int64
		source Source
	}{
		{"v2 container root", "0::/\n", map[string]string{"memory.max": "1073741824\n"}, 1 << 30, SourceCgroupV2},
		{"v2 nested, parent smaller", "0::/a/b\n", map[string]string{"a/memory.max": "536870912", "a/b/memory.max": "max"}, 512 << 20, SourceCgroupV2},
		{"v2 unlimited", "0::/a\n", map[string]string{"memory.max": "max", "a/memory.max": "max"}, 24576000 << 10, SourceMachine},
		{"v1 as podman mounts it", "4:memory:/machine/libpod-abc\n0::/\n", map[string]string{"memory/memory.limit_in_bytes": "1073741824"}, 1 << 30, SourceCgroupV1},
		{"v1 unlimited", "4:memory:/x\n", map[string]string{"memory/x/memory.limit_in_bytes": "9223372036854771712"}, 24576000 << 10, SourceMachine},
		{"v1 with other controllers", "4:cpu,memory:/x\n", map[string]string{"memory/x/memory.limit_in_bytes": "2147483648"}, 2 << 30, SourceCgroupV1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, filepath.Join(dir, "self"), tc.cgroup)
			write(t, filepath.Join(dir, "meminfo"), meminfo)
			for p, s := range tc.files {
				write(t, filepath.Join(dir, "fs", p), s)
			}
			got, src := detect(filepath.Join(dir, "self"), filepath.Join(dir, "fs"), filepath.Join(dir, "meminfo"))
			if got != tc.want || src != tc.source {
				t.Errorf("detect = %d (%s); want %d (%s)", got, src, tc.want, tc.source)
			}
		})
	}
}

// TestBudget: a budget leaves headroom for the Go runtime and what is not budgeted.
func TestBudget(t *testing.T) {
	for _, tc := range []struct{ limit, want int64 }{
		{0, 0},
		{1 << 30, 1<<30 - (1<<30)/5},
		{256 << 20, 128 << 20},
		{160 << 20, 40 << 20},
		{16 << 30, 16<<30 - (16<<30)/5},
	} {
		if got := Budget(tc.limit); got != tc.want {
			t.Errorf("Budget(%d) = %d; want %d", tc.limit, got, tc.want)
		}
	}
}
