package runtime

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestFailureReasonsReadClearly: an unknown return status and a wasi-stdio exit code other
// than 0, 75 and 65 are failures (retried, then dead-lettered) whose reason says so in the
// ABI's words, with the guest's own text when it gave one and no empty field when it did
// not (it read "exit code 1: : handler returned an unknown status"); they still match
// ErrBadStatus.
func TestFailureReasonsReadClearly(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{exitFailure("m-1", 1, ""), "runtime: message m-1: failed: the program exited with code 1 (0 is ok, 75 retry, 65 reject, anything else a failure) (the handler gave no reason)"},
		{exitFailure("m-1", 3, "bad input on line 4"), "runtime: message m-1: failed: the program exited with code 3 (0 is ok, 75 retry, 65 reject, anything else a failure): bad input on line 4"},
		{badStatus("message m-2", 7, ""), "runtime: message m-2: failed: the handler returned status 7, which is not 0 (ok), 1 (retry) or 2 (reject) (the handler gave no reason)"},
		{badStatus("message m-2", -1, "oops"), "runtime: message m-2: failed: the handler returned status -1, which is not 0 (ok), 1 (retry) or 2 (reject): oops"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("reason\n %q\nwant\n %q", got, tc.want)
		}
		if !errors.Is(tc.err, ErrBadStatus) {
			t.Errorf("%q does not match ErrBadStatus", tc.err)
		}
		if strings.Contains(tc.err.Error(), ": :") {
			t.Errorf("%q has an empty field", tc.err)
		}
	}
	// End to end: the stdio fixture exiting 3 without stderr.
	e := testEngine(t)
	ten, err := e.Tenant("acme", TenantLimits{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := ten.NewPool(context.Background(), load(t, e, "testdata/stdio/stdio.wasm", ABIWasiStdio),
		PoolConfig{Binding: "conv", OutputQueue: "out", Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	_, err = p.Call(context.Background(), &Input{ID: "m-3", Body: []byte("exit:3")})
	if !errors.Is(err, ErrBadStatus) || !strings.Contains(err.Error(), "message m-3: failed: the program exited with code 3") || strings.Contains(err.Error(), ": :") {
		t.Errorf("exit 3: %v", err)
	}
}
