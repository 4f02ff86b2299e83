package engine

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"
)

// cacheDir is shared by the package's tests so that each module compiles once per run.
var cacheDir string

func TestMain(m *testing.M) {
	d, err := os.MkdirTemp("", "wqbench-cache-")
	if err != nil {
		panic(err)
	}
	cacheDir = d
	code := m.Run()
	os.RemoveAll(d)
	os.Exit(code)
}

func testPaths(t testing.TB) Paths {
	t.Helper()
	repo, err := FindRepo(".")
	if err != nil {
		t.Fatal(err)
	}
	wasm, err := FindExtismWasm(".")
	if err != nil {
		t.Fatal(err)
	}
	return Paths{Repo: repo, ExtismWasm: wasm, CacheDir: cacheDir}
}

// TestSameLogicEverywhere is what makes the comparisons fair: every engine that runs a logic
// gives the floor's output, byte for byte, for the same sequence of messages (the running
// total included).
func TestSameLogicEverywhere(t *testing.T) {
	ctx := context.Background()
	p := testPaths(t)
	inputs := map[Logic][][]byte{
		Noop:   {[]byte("hello"), nil, make([]byte, 4096)},
		Vowels: {[]byte("hello world"), []byte("aaaaaa"), nil, []byte("bbbbbbb"), []byte("ÀEIOU é ünïcode")},
		Billing: {
			[]byte(`{"id":"tx-1","account":"acme","currency":"EUR","items":[{"sku":"a","quantity":3,"unit_price":2.5}]}`),
			[]byte(`{"id":"tx-2","account":"acme","currency":"EUR","amount":10}`),
		},
	}
	for _, l := range Logics {
		floor, err := Open(ctx, Go, l, 1, p)
		if err != nil {
			t.Fatal(err)
		}
		var want [][]byte
		for _, in := range inputs[l] {
			out, err := floor.Call(ctx, in)
			if err != nil {
				t.Fatalf("%s floor(%q): %v", l, in, err)
			}
			want = append(want, out)
		}
		for _, k := range Kinds[1:] {
			t.Run(string(l)+"/"+string(k), func(t *testing.T) {
				c, err := Open(ctx, k, l, 1, p)
				if errors.Is(err, ErrUnsupported) {
					t.Skipf("%s has no %s module", k, l)
				}
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close(ctx)
				for i, in := range inputs[l] {
					got, err := c.Call(ctx, in)
					if err != nil {
						t.Fatalf("call %d (%q): %v", i, in, err)
					}
					if k == Instantiate && l == Vowels {
						// A fresh instance per message: the running total restarts each time.
						continue
					}
					if string(got) != string(want[i]) {
						t.Errorf("call %d (%.20q): got %s, want %s", i, in, got, want[i])
					}
				}
			})
		}
	}
}

func TestBillingRejectsMalformed(t *testing.T) {
	ctx := context.Background()
	for _, k := range []Kind{Go, Wqhost} {
		c, err := Open(ctx, k, Billing, 1, testPaths(t))
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Call(ctx, []byte(`{"id":"tx-9"`))
		if !errors.Is(err, ErrRejected) {
			t.Errorf("%s: malformed transaction: err = %v, want ErrRejected", k, err)
		}
		_ = c.Close(ctx)
	}
}

// TestConcurrentCallers checks the pooled engines serve several goroutines at once without
// sharing an instance (run with -race).
func TestConcurrentCallers(t *testing.T) {
	ctx := context.Background()
	for _, k := range []Kind{Wqhost, Extism} {
		c, err := Open(ctx, k, Vowels, 3, testPaths(t))
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 6)
		for range 6 {
			wg.Go(func() {
				for range 20 {
					if _, err := c.Call(ctx, []byte("concurrent")); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("%s: %v", k, err)
		}
		_ = c.Close(ctx)
	}
}

func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	p := testPaths(t)
	if _, err := Open(ctx, Extism, Billing, 1, p); !errors.Is(err, ErrUnsupported) {
		t.Errorf("extism billing: %v, want ErrUnsupported", err)
	}
	if _, err := Open(ctx, "nope", Noop, 1, p); err == nil {
		t.Error("unknown engine accepted")
	}
	p.Repo = os.TempDir()
	if _, err := Open(ctx, Wqhost, Noop, 1, p); err == nil {
		t.Error("missing module accepted")
	}
}
