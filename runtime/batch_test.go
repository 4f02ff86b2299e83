package runtime

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/wqhost/wqhost/internal/wasmtest"
)

// The batch ABI (docs/abi.md, "Batches") against testdata/batchguest, whose message bodies
// are scripts of steps (see its main.go).

const batchGuestPath = "testdata/batchguest/batchguest.wasm"

func batchPool(t testing.TB, e *Engine, cfg PoolConfig) *Pool {
	t.Helper()
	ten, err := e.Tenant("bt", TenantLimits{MemoryPages: 1024})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Binding == "" {
		cfg.Binding = "b"
	}
	cfg.OutputQueue, cfg.Batch = "out", true
	p, err := ten.NewPool(context.Background(), load(t, e, batchGuestPath, ABIWqhostV1), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	return p
}

// batch makes messages m0, m1, ... with the given bodies.
func batch(bodies ...string) []*Input {
	ins := make([]*Input, len(bodies))
	for i, b := range bodies {
		ins[i] = &Input{ID: fmt.Sprintf("m%d", i), Queue: "jobs", Body: []byte(b), DequeueCount: 3}
	}
	return ins
}

// wantMsg is how a message should end: with err, Err must wrap it; otherwise the status,
// retry delay, reason and output bodies (to queue "out") must match.
type wantMsg struct {
	status  Verdict
	retry   time.Duration
	text    string
	outputs []string
	err     error
}

func ok(outputs ...string) wantMsg { return wantMsg{status: VerdictOK, outputs: outputs} }

// shown is an output as the tests compare it: its body, after its queue unless that is the
// binding's "out".
func shown(e Emitted) string {
	if e.Queue == "out" {
		return string(e.Body)
	}
	return e.Queue + ":" + string(e.Body)
}

func bodies(es []Emitted) []string {
	var out []string
	for _, e := range es {
		out = append(out, shown(e))
	}
	return out
}

// reportOf is the body of the call's output to queue "report" (the guest's "report" step).
func reportOf(t *testing.T, es []Emitted) string {
	t.Helper()
	for _, e := range es {
		if e.Queue == "report" {
			return string(e.Body)
		}
	}
	t.Fatalf("no report among %q", bodies(es))
	return ""
}

func checkBatch(t *testing.T, bo *BatchOutput, want []wantMsg, callOutputs []string) {
	t.Helper()
	if bo == nil || len(bo.Messages) != len(want) {
		t.Fatalf("got %+v, want %d messages", bo, len(want))
	}
	for i, w := range want {
		r := bo.Messages[i]
		if w.err != nil {
			if !errors.Is(r.Err, w.err) || !strings.Contains(r.Err.Error(), fmt.Sprintf("message m%d", i)) || len(r.Outputs) != 0 {
				t.Errorf("m%d: %+v; want Err wrapping %v naming the message, no outputs", i, r, w.err)
			}
			if text := r.Err.Error(); strings.Count(text, "runtime: ") != 1 {
				t.Errorf("m%d: error %q: want one \"runtime: \" prefix, naming the message once", i, text)
			}
			continue
		}
		if r.Err != nil || r.Verdict != w.status || r.RetryAfter != w.retry || r.ErrorText != w.text ||
			fmt.Sprint(bodies(r.Outputs)) != fmt.Sprint(w.outputs) {
			t.Errorf("m%d: status %d retry %s text %q outputs %q err %v; want %d %s %q %q",
				i, r.Verdict, r.RetryAfter, r.ErrorText, bodies(r.Outputs), r.Err, w.status, w.retry, w.text, w.outputs)
		}
	}
	if fmt.Sprint(bodies(bo.Outputs)) != fmt.Sprint(callOutputs) {
		t.Errorf("call outputs %q, want %q", bodies(bo.Outputs), callOutputs)
	}
}

// TestBatchVerdicts: each message ends by its own verdict, or by the call's status when it
// has none; outputs go with their message, the call's own only with a return of 0.
func TestBatchVerdicts(t *testing.T) {
	e := testEngine(t)
	p := batchPool(t, e, PoolConfig{Timeout: 10 * time.Second})
	for _, tt := range []struct {
		name        string
		bodies      []string
		want        []wantMsg
		callOutputs []string
		err         error
	}{
		{
			name:   "partial failure, call ok",
			bodies: []string{"ok", "retry 250", "reject why", "none", "emit;ok", "emit jobs2", "retry -5"},
			want: []wantMsg{ok(), {status: VerdictRetry, retry: 250 * time.Millisecond, text: "retry 250"},
				{status: VerdictReject, text: "why"}, ok(), ok("emit;ok"), ok("jobs2:emit jobs2"),
				{status: VerdictRetry, text: "retry -5"}},
		},
		{
			name:   "no verdict follows a retry",
			bodies: []string{"emit;ok", "none;callstatus 1;callretry 300;callerror later;callemit agg", "emit"},
			want: []wantMsg{ok("emit;ok"), {status: VerdictRetry, retry: 300 * time.Millisecond, text: "later"},
				{status: VerdictRetry, retry: 300 * time.Millisecond, text: "later"}},
		},
		{
			name:   "no verdict follows a reject",
			bodies: []string{"reject own", "callstatus 2;callerror bad batch", "emit;retry 7"},
			want: []wantMsg{{status: VerdictReject, text: "own"}, {status: VerdictReject, text: "bad batch"},
				{status: VerdictRetry, retry: 7 * time.Millisecond, text: "retry 7"}},
		},
		{
			name:        "call output kept on 0",
			bodies:      []string{"retry 5", "callemit agg"},
			want:        []wantMsg{{status: VerdictRetry, retry: 5 * time.Millisecond, text: "retry 5"}, ok()},
			callOutputs: []string{"agg"},
		},
		{
			name:   "unknown status fails the messages without a verdict",
			bodies: []string{"emit;ok", "callstatus 7;callemit agg", "emit"},
			want:   []wantMsg{ok("emit;ok"), {err: ErrBadStatus}, {err: ErrBadStatus}},
			err:    ErrBadStatus,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			bo, err := p.CallBatch(context.Background(), batch(tt.bodies...))
			if !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
				t.Fatalf("err = %v, want %v", err, tt.err)
			}
			checkBatch(t, bo, tt.want, tt.callOutputs)
		})
	}
}

// TestBatchFailsHalfway: a trap, a bad pointer, the time limit or the caller's deadline
// halfway through a batch keeps the verdicts set before it (an ok one's outputs too), fails
// the other messages with the call's error, drops the call's own outputs and replaces the
// instance; the pool serves the next batch.
func TestBatchFailsHalfway(t *testing.T) {
	e := testEngine(t)
	p := batchPool(t, e, PoolConfig{Binding: "short", MinInstances: 1, MaxInstances: 1, Timeout: 300 * time.Millisecond})
	long := batchPool(t, e, PoolConfig{Binding: "long", MinInstances: 1, MaxInstances: 1, Timeout: 10 * time.Minute})
	for _, tt := range []struct {
		step     string
		pool     *Pool
		ctx      time.Duration // the caller's deadline; 0: none
		err      error
		contains string
	}{
		{step: "trap", pool: p, err: ErrTrap},
		{step: "oob", pool: p, err: ErrTrap, contains: "wqhost.batch_body"},
		{step: "spin", pool: p, err: ErrTimeout},
		{step: "spin", pool: long, ctx: 300 * time.Millisecond, err: context.DeadlineExceeded},
	} {
		t.Run(tt.step+"/"+tt.pool.cfg.Binding, func(t *testing.T) {
			ctx := context.Background()
			if tt.ctx > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.ctx)
				defer cancel()
			}
			before := tt.pool.Stats()
			bo, err := tt.pool.CallBatch(ctx, batch("emit;ok", "retry 10", "callemit agg;emit;"+tt.step, "emit"))
			if !errors.Is(err, tt.err) || !strings.Contains(fmt.Sprint(err), tt.contains) {
				t.Fatalf("err = %v, want %v containing %q", err, tt.err, tt.contains)
			}
			checkBatch(t, bo, []wantMsg{ok("emit;ok"), {status: VerdictRetry, retry: 10 * time.Millisecond, text: "retry 10"},
				{err: tt.err}, {err: tt.err}}, nil)
			after := tt.pool.Stats()
			if after.Discarded != before.Discarded+1 {
				t.Errorf("discarded %d, want %d", after.Discarded, before.Discarded+1)
			}
			if tt.err == ErrTimeout && after.Timeouts != before.Timeouts+1 || tt.err == ErrTrap && after.Traps != before.Traps+1 {
				t.Errorf("counters %+v after %+v", after, before)
			}
			bo, err = tt.pool.CallBatch(context.Background(), batch("emit", "reject no"))
			if err != nil {
				t.Fatalf("next batch: %v", err)
			}
			checkBatch(t, bo, []wantMsg{ok("emit"), {status: VerdictReject, text: "no"}}, nil)
		})
	}
}

// TestBatchReturnCodes: the first verdict is final (a second one, or an output after it, is
// ERR_DENIED); an index outside the batch or an unknown status is ERR_INVALID; batch_emit
// answers emit's codes.
func TestBatchReturnCodes(t *testing.T) {
	e := testEngine(t)
	p := batchPool(t, e, PoolConfig{AllowEmit: func(q string) error {
		if strings.HasSuffix(q, "-poison") {
			return errors.New("dead letters are the host's")
		}
		return nil
	}})
	bo, err := p.CallBatch(context.Background(), batch(
		"ok;ok;retry 5;reject x",
		"emit;reject r;emit;emitat 1",
		"verdict 7;verdict -1;verdict 3;verdictat 4;verdictat -1;emitat 4;emitat -1;emit jobs-poison;emit bad/name;ok",
		"report",
	))
	if err != nil {
		t.Fatal(err)
	}
	report := "report:0: ok=0 ok=-2 retry=-2 reject=-2\n" +
		"1: emit=0 reject=0 emit=-2 emitat=-2\n" +
		"2: verdict=-5 verdict=-5 verdict=-5 verdictat=-5 verdictat=-5 emitat=-5 emitat=-5 emit=-2 emit=-5 ok=0\n" +
		"3: "
	checkBatch(t, bo, []wantMsg{ok(), {status: VerdictReject, text: "r"}, ok(), ok()}, []string{report})
}

// TestBatchOutputCaps: each message has one message's output limits, and all outputs of a
// call together MaxCallOutputBytes, in a batch call and in a single one.
func TestBatchOutputCaps(t *testing.T) {
	e := testEngine(t)
	p := batchPool(t, e, PoolConfig{MaxOutputBytes: 1000, MaxOutputTotalBytes: 1500, MaxOutputs: 3, MaxCallOutputBytes: 4000})
	bo, err := p.CallBatch(context.Background(), batch(
		"big 1000;big 1000", // the second: past the message's total
		"big 1001",          // past one output's size
		"big 1;big 1;big 1;big 1",
		"big 1000",
		"big 1000",
		"big 1000;callbig 700", // past the call's 4000 (3003 so far); the call's own fits
		"callbig 700",          // the call's own: 1400 of its 1500, but past the call's 4000
		"report",
	))
	if err != nil {
		t.Fatal(err)
	}
	r := reportOf(t, bo.Outputs)
	for _, w := range []string{"0: big=0 big=-3\n", "1: big=-3\n", "2: big=0 big=0 big=0 big=-4\n", "5: big=-3 callbig=0\n", "6: callbig=-3\n"} {
		if !strings.Contains(r, w) {
			t.Errorf("report lacks %q:\n%s", w, r)
		}
	}
	var n []int
	for _, m := range bo.Messages {
		n = append(n, len(m.Outputs))
	}
	if fmt.Sprint(n) != "[1 0 3 1 1 0 0 0]" || len(bo.Outputs) != 2 {
		t.Errorf("outputs per message %v", n)
	}

	// A single call: emit and batch_emit(0) count against the same message and call caps.
	q := batchPool(t, e, PoolConfig{Binding: "single", MaxOutputTotalBytes: 5000, MaxCallOutputBytes: 1500})
	out, err := q.Call(context.Background(), &Input{ID: "s", Body: []byte("big 1000;callbig 1000;callbig 400;report")})
	if err != nil || out.Verdict != VerdictOK || len(out.Outputs) != 3 {
		t.Fatalf("%+v %v", out, err)
	}
	if got := reportOf(t, out.Outputs); got != "0: big=0 callbig=-3 callbig=0" {
		t.Errorf("report %q", got)
	}
}

// TestBatchSingleCall: wqhost_handle's batch is its one message, and batch_verdict(0, ...)
// replaces the returned status; every output follows the resulting status.
func TestBatchSingleCall(t *testing.T) {
	e := testEngine(t)
	p := batchPool(t, e, PoolConfig{Timeout: 10 * time.Second})
	for _, tt := range []struct {
		body string
		want wantMsg
	}{
		{"ok;callstatus 1", ok()},
		{"reject nope;callstatus 0", wantMsg{status: VerdictReject, text: "nope"}},
		{"retry 250;callerror set;callretry 900;callstatus 1", wantMsg{status: VerdictRetry, retry: 250 * time.Millisecond, text: "retry 250"}},
		{"none;callerror set;callretry 900;callstatus 1", wantMsg{status: VerdictRetry, retry: 900 * time.Millisecond, text: "set"}},
		{"emit;reject x;callemit agg", wantMsg{status: VerdictReject, text: "x"}},
		{"emit;callemit agg;ok;callstatus 2", ok("emit;callemit agg;ok;callstatus 2", "agg")},
		{"emit;callemit agg", ok("emit;callemit agg", "agg")},
		{"none;callstatus 7", wantMsg{err: ErrBadStatus}},
		{"ok;callstatus 7", ok()},
		{"trap", wantMsg{err: ErrTrap}},
		// The verdict is final: a failure after it is logged, the instance replaced.
		{"emit;ok;trap", ok("emit;ok;trap")},
		{"emitat 1;verdictat 1;report", ok("report:0: emitat=-5 verdictat=-5")},
	} {
		t.Run(tt.body, func(t *testing.T) {
			out, err := p.Call(context.Background(), &Input{ID: "m0", Body: []byte(tt.body)})
			var bo BatchOutput
			if err != nil {
				bo.Messages = []Result{{Err: err}}
			} else {
				bo.Messages = []Result{{Verdict: out.Verdict, RetryAfter: out.RetryAfter, ErrorText: out.ErrorText, Outputs: out.Outputs}}
			}
			checkBatch(t, &bo, []wantMsg{tt.want}, nil)
		})
	}
	if s := p.Stats(); s.Traps != 2 || s.Discarded != 2 {
		t.Errorf("stats %+v: want both traps counted and their instances replaced", s)
	}
}

// TestBatchMessageView: in a batch call msg_* see no message (but tenant and binding), the
// batch_* functions see each; a single call is a batch of one; log lines name the batch.
func TestBatchMessageView(t *testing.T) {
	var buf syncBuffer
	e := engineLoggingTo(t, &buf)
	p := batchPool(t, e, PoolConfig{})
	bo, err := p.CallBatch(context.Background(), batch("probe;log hello;report", "none"))
	if err != nil {
		t.Fatal(err)
	}
	want := "0: size=2 msg_body_len=0 msg_body=0 msg_id=-1 msg_tenant=bt msg_binding=b id=m0 queue=jobs dequeue_count=3 nope=-1\n1: "
	if got := reportOf(t, bo.Outputs); got != want {
		t.Errorf("batch call sees\n%s\nwant\n%s", got, want)
	}
	if log := buf.String(); !strings.Contains(log, "msg=hello ") || !strings.Contains(log, "message_id=m0 batch_size=2 source=guest") {
		t.Errorf("log line lacks the batch:\n%s", log)
	}
	out, err := p.Call(context.Background(), &Input{ID: "s1", Queue: "jobs", Body: []byte("probe;report"), DequeueCount: 1})
	if err != nil {
		t.Fatal(err)
	}
	want = "0: size=1 msg_body_len=12 msg_body=8 msg_id=s1 msg_tenant=bt msg_binding=b id=s1 queue=jobs dequeue_count=1 nope=-1"
	if got := reportOf(t, out.Outputs); got != want {
		t.Errorf("single call sees\n%s\nwant\n%s", got, want)
	}
}

// TestBatchSelfTest: a self test sees an empty batch that takes no verdict or output.
func TestBatchSelfTest(t *testing.T) {
	e := testEngine(t)
	ten, _ := e.Tenant("t", TenantLimits{})
	if err := ten.Validate(context.Background(), load(t, e, batchGuestPath, ABIWqhostV1), PoolConfig{Binding: "b", Batch: true}); err != nil {
		t.Fatal(err)
	}
}

// TestBatchLoadChecks: a batch binding needs a wqhost/v1 module exporting
// wqhost_handle_batch () -> i32; a wrong signature is refused at load; CallBatch without the
// export fails every message.
func TestBatchLoadChecks(t *testing.T) {
	e := testEngine(t)
	ctx := context.Background()
	ten, _ := e.Tenant("t", TenantLimits{})
	plain := load(t, e, guestPath, ABIWqhostV1)
	if plain.HandlesBatches() || !load(t, e, batchGuestPath, ABIWqhostV1).HandlesBatches() {
		t.Error("HandlesBatches wrong")
	}
	for _, tt := range []struct {
		m    *Module
		want []string
	}{
		{plain, []string{"binding nb", guestPath, "does not export wqhost_handle_batch"}},
		{load(t, e, "testdata/stdio/stdio.wasm", ABIWasiStdio), []string{"binding nb", "stdio.wasm", "wasi-stdio", "wqhost_handle_batch"}},
	} {
		_, err := ten.NewPool(ctx, tt.m, PoolConfig{Binding: "nb", Batch: true})
		for _, w := range tt.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("NewPool(%s, Batch) = %v; want an error naming %q", tt.m.Name(), err, w)
			}
		}
	}
	for _, sig := range []struct {
		params, results []byte
		want            string
	}{{[]byte{wasmtest.I32}, []byte{wasmtest.I32}, "(i32)->(i32)"}, {nil, nil, "()->()"}} {
		var body []byte
		if len(sig.results) > 0 {
			body = wasmtest.I32Const(0)
		}
		wasm := wasmtest.Module(
			wasmtest.Func{Export: "wqhost_abi_v1"},
			wasmtest.Func{Export: "wqhost_handle", Results: []byte{wasmtest.I32}, Body: wasmtest.I32Const(0)},
			wasmtest.Func{Export: "wqhost_handle_batch", Params: sig.params, Results: sig.results, Body: body},
		)
		_, err := e.Compile(ctx, "wrong.wasm", wasm, ABIWqhostV1)
		if w := "wrong.wasm does not fit abi wqhost/v1: export wqhost_handle_batch has signature " + sig.want + ", want ()->(i32)"; err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("Compile = %v; want %q", err, w)
		}
	}

	p, err := ten.NewPool(ctx, plain, PoolConfig{Binding: "nb"})
	if err != nil {
		t.Fatal(err)
	}
	if bo, err := p.CallBatch(ctx, nil); err != nil || len(bo.Messages) != 0 || p.Stats().Calls != 0 {
		t.Errorf("empty batch: %+v %v, %d calls", bo, err, p.Stats().Calls)
	}
	bo, err := p.CallBatch(ctx, batch("a", "b"))
	if err == nil || !strings.Contains(err.Error(), "wqhost_handle_batch") {
		t.Errorf("CallBatch without the export: %v", err)
	}
	checkBatch(t, bo, []wantMsg{{err: err}, {err: err}}, nil)
	_ = p.Close(ctx)

	q := batchPool(t, e, PoolConfig{Binding: "closing"})
	_ = q.Close(ctx)
	bo, err = q.CallBatch(ctx, batch("ok", "none"))
	if !errors.Is(err, ErrPoolClosed) {
		t.Errorf("closed pool: %v", err)
	}
	checkBatch(t, bo, []wantMsg{{err: ErrPoolClosed}, {err: ErrPoolClosed}}, nil)
	if !strings.Contains(err.Error(), "batch of 2 messages from m0") {
		t.Errorf("error %q does not name the batch", err)
	}
}

// TestReasonTextCapped: a reason is kept as at most 4 KiB of valid UTF-8, even when the
// replacement of bad bytes would grow it.
func TestReasonTextCapped(t *testing.T) {
	for _, in := range [][]byte{
		[]byte(strings.Repeat("é", 3000)),                     // cut inside a rune
		[]byte(strings.Repeat("\xffa", 3000)),                 // each bad byte grows to 3
		append([]byte(strings.Repeat("a", 4095)), 0xc3, 0xa9), // a rune across the cap
	} {
		got := reasonText(in)
		if len(got) > maxLogLine || !utf8.ValidString(got) || len(got) < maxLogLine-3 {
			t.Errorf("reasonText(%d bytes) = %d bytes, valid %v", len(in), len(got), utf8.ValidString(got))
		}
	}
}
