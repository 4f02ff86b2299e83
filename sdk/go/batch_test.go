//go:build !wasip1

// The batch tests swap the native host stand-in (host_other.go) for a fake, so they exist
// only off wasm.

package wqhost

import (
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fakeMsg is one message a fakeHost holds.
type fakeMsg struct {
	body string
	meta map[string]string
}

// fakeOutput is one emit or batch_emit call; index is -1 for emit (the call's own outputs).
type fakeOutput struct {
	index int32
	queue string
	body  string
}

// fakeVerdict is one accepted batch_verdict call.
type fakeVerdict struct {
	status int32
	ms     int64
	reason string
}

// fakeHost is a native host with a batch, for the dispatch between Handle and HandleBatch.
// It follows docs/abi.md's batch functions: indices outside the batch and unknown statuses
// are ERR_INVALID, and the first verdict is final (a second one, and batch_emit after one,
// ERR_DENIED). single makes it a wqhost_handle call: msg_* read message 0.
type fakeHost struct {
	emptyHost
	msgs     []fakeMsg
	single   bool
	outputs  []fakeOutput
	verdicts map[int32]fakeVerdict
	errText  string
	retryMS  int64
	// verdictCode, when not 0, is returned by every batch_verdict instead of accepting it.
	verdictCode int32
}

// install makes h the package's host and resets the handler state; both are restored when
// the test ends. Tests that call Emit must use the package's guest g, as the exports do.
func (h *fakeHost) install(t *testing.T) {
	t.Helper()
	h.verdicts = map[int32]fakeVerdict{}
	oldNative, oldG := native, g
	native, g = h, guest{}
	t.Cleanup(func() { native, g = oldNative, oldG })
}

func (h *fakeHost) valid(i int32) bool { return i >= 0 && int(i) < len(h.msgs) }

func (h *fakeHost) bodyLen() int32 {
	if !h.single {
		return 0
	}
	return int32(len(h.msgs[0].body))
}

func (h *fakeHost) body(dst []byte) int32 {
	if !h.single {
		return 0
	}
	return int32(copy(dst, h.msgs[0].body))
}

func (h *fakeHost) meta(key string, buf []byte) int32 {
	if !h.single {
		return -1
	}
	return fakeGet(h.msgs[0].meta)(key, buf)
}

func (h *fakeHost) setError(msg string) { h.errText = msg }

func (h *fakeHost) retryAfter(ms int64) { h.retryMS = ms }

func (h *fakeHost) emit(queue string, body []byte) int32 {
	h.outputs = append(h.outputs, fakeOutput{-1, queue, string(body)})
	return 0
}

func (h *fakeHost) batchSize() int32 { return int32(len(h.msgs)) }

func (h *fakeHost) batchBodyLen(i int32) int32 {
	if !h.valid(i) {
		return -5
	}
	return int32(len(h.msgs[i].body))
}

func (h *fakeHost) batchBody(i int32, dst []byte) int32 {
	if !h.valid(i) {
		return -5
	}
	return int32(copy(dst, h.msgs[i].body))
}

func (h *fakeHost) batchMeta(i int32, key string, buf []byte) int32 {
	if !h.valid(i) {
		return -5
	}
	return fakeGet(h.msgs[i].meta)(key, buf)
}

func (h *fakeHost) batchEmit(i int32, queue string, body []byte) int32 {
	if !h.valid(i) {
		return -5
	}
	if _, ok := h.verdicts[i]; ok {
		return -2
	}
	h.outputs = append(h.outputs, fakeOutput{i, queue, string(body)})
	return 0
}

func (h *fakeHost) batchVerdict(i, status int32, ms int64, reason string) int32 {
	if h.verdictCode != 0 {
		return h.verdictCode
	}
	if !h.valid(i) || status < 0 || status > 2 {
		return -5
	}
	if _, ok := h.verdicts[i]; ok {
		return -2
	}
	h.verdicts[i] = fakeVerdict{status, ms, reason}
	return 0
}

// batchOf returns messages with the given bodies and ids m0, m1, ...
func batchOf(bodies ...string) []fakeMsg {
	msgs := make([]fakeMsg, len(bodies))
	for i, b := range bodies {
		msgs[i] = fakeMsg{body: b, meta: map[string]string{"id": "m" + strconv.Itoa(i), "dequeue_count": strconv.Itoa(i + 1)}}
	}
	return msgs
}

func TestBatchHandlerVerdictsAndOutputs(t *testing.T) {
	h := &fakeHost{msgs: batchOf("keep", "bad", "later", "own")}
	h.install(t)
	boom := errors.New("boom")
	HandleBatch(func(b *Batch) Result {
		if b.Len() != 4 {
			t.Fatalf("Len = %d, want 4", b.Len())
		}
		if err := Emit("all", []byte("call output")); err != nil {
			t.Fatalf("Emit: %v", err)
		}
		m := b.Message(1)
		if err := m.Reject(errors.New("bad " + m.ID())); err != nil {
			t.Fatalf("Reject: %v", err)
		}
		if err := b.Message(2).Retry(1500*time.Millisecond, boom); err != nil {
			t.Fatalf("Retry: %v", err)
		}
		own := b.Message(3)
		if err := own.Emit("mine", own.Body()); err != nil {
			t.Fatalf("BatchMessage.Emit: %v", err)
		}
		if err := own.OK(); err != nil {
			t.Fatalf("OK: %v", err)
		}
		// The first verdict is final, and a message with one takes no more outputs.
		err := own.Reject(boom)
		var ve *VerdictError
		if !errors.As(err, &ve) || ve.Index != 3 || !errors.Is(err, ErrDenied) || !strings.Contains(err.Error(), "has a verdict already") {
			t.Fatalf("second verdict = %v, want a VerdictError for message 3 unwrapping to ErrDenied", err)
		}
		if err := own.Emit("", nil); !errors.Is(err, ErrDenied) {
			t.Fatalf("Emit after a verdict = %v, want ErrDenied", err)
		}
		if m.DequeueCount() != 2 || own.ID() != "m3" {
			t.Fatalf("metadata of message 1: dequeue count %d; id of 3: %q", m.DequeueCount(), own.ID())
		}
		return Retry(2*time.Second, boom)
	})
	if got := g.handleBatch(); got != int32(StatusRetry) {
		t.Fatalf("handleBatch = %d, want the handler's retry", got)
	}
	wantVerdicts := map[int32]fakeVerdict{1: {2, 0, "bad m1"}, 2: {1, 1500, "boom"}, 3: {0, 0, ""}}
	if !reflect.DeepEqual(h.verdicts, wantVerdicts) {
		t.Errorf("verdicts %+v, want %+v (message 0 ends by the returned status)", h.verdicts, wantVerdicts)
	}
	if h.errText != "boom" || h.retryMS != 2000 {
		t.Errorf("call status reason %q, delay %d; want boom, 2000", h.errText, h.retryMS)
	}
	wantOut := []fakeOutput{{-1, "all", "call output"}, {3, "mine", "own"}}
	if !reflect.DeepEqual(h.outputs, wantOut) {
		t.Errorf("outputs %+v, want %+v", h.outputs, wantOut)
	}
}

// TestBatchBodiesStayValid: every body read during a call stays intact until it ends, also
// when a later, larger body makes the SDK take a bigger buffer, and appending to one body
// does not overwrite the next.
func TestBatchBodiesStayValid(t *testing.T) {
	bodies := []string{"first", strings.Repeat("b", 100), "", strings.Repeat("d", 5000), "e"}
	h := &fakeHost{msgs: batchOf(bodies...)}
	h.install(t)
	HandleBatch(func(b *Batch) Result {
		var got [][]byte
		for m := range b.Messages() {
			got = append(got, m.Body())
		}
		_ = append(got[0], "XXXX"...)
		for i, body := range got {
			if string(body) != bodies[i] {
				t.Errorf("body %d = %q after reading the batch, want %q", i, body, bodies[i])
			}
			if again := b.Message(i).Body(); string(again) != bodies[i] {
				t.Errorf("body %d read again = %q", i, again)
			}
		}
		return OK()
	})
	if got := g.handleBatch(); got != 0 {
		t.Fatalf("handleBatch = %d, want 0", got)
	}
	// Later calls that fit read into the same memory rather than allocating.
	var addrs []*byte
	HandleBatch(func(b *Batch) Result {
		body := b.Message(0).Body()
		if string(body) != "FIRST" {
			t.Errorf("body %q, want FIRST", body)
		}
		addrs = append(addrs, &body[0])
		return OK()
	})
	h.msgs = batchOf("FIRST")
	g.handleBatch()
	g.handleBatch()
	if addrs[0] != addrs[1] {
		t.Error("a second batch of the same size read its body into new memory")
	}
}

func TestBatchMessagesStopsEarly(t *testing.T) {
	h := &fakeHost{msgs: batchOf("a", "b", "c")}
	h.install(t)
	var seen []int
	HandleBatch(func(b *Batch) Result {
		for m := range b.Messages() {
			if m.Index() == 1 {
				break
			}
			seen = append(seen, m.Index())
		}
		return OK()
	})
	g.handleBatch()
	if !reflect.DeepEqual(seen, []int{0}) {
		t.Fatalf("iterated %v, want [0] before the break", seen)
	}
}

// TestMessageHandlerOnBatch: a Handle handler on a wqhost_handle_batch call runs once per
// message; each Result becomes that message's verdict and Emit is tied to the message.
func TestMessageHandlerOnBatch(t *testing.T) {
	h := &fakeHost{msgs: batchOf("a long first body", "retry", "reject", "ok")}
	h.install(t)
	var ids []string
	Handle(func(m *Message) Result {
		ids = append(ids, m.ID())
		body := string(m.Body())
		if err := Emit("out", []byte("echo "+body)); err != nil {
			return Retry(0, err)
		}
		switch body {
		case "retry":
			return Retry(time.Microsecond, errors.New("busy"))
		case "reject":
			return Reject(errors.New("no " + m.ID()))
		}
		return OK()
	})
	if got := g.handleBatch(); got != 0 {
		t.Fatalf("handleBatch = %d (error %q), want 0: every message has its verdict", got, h.errText)
	}
	if want := []string{"m0", "m1", "m2", "m3"}; !reflect.DeepEqual(ids, want) {
		t.Errorf("handled ids %v, want %v", ids, want)
	}
	wantVerdicts := map[int32]fakeVerdict{0: {0, 0, ""}, 1: {1, 1, "busy"}, 2: {2, 0, "no m2"}, 3: {0, 0, ""}}
	if !reflect.DeepEqual(h.verdicts, wantVerdicts) {
		t.Errorf("verdicts %+v, want %+v", h.verdicts, wantVerdicts)
	}
	wantOut := []fakeOutput{{0, "out", "echo a long first body"}, {1, "out", "echo retry"}, {2, "out", "echo reject"}, {3, "out", "echo ok"}}
	if !reflect.DeepEqual(h.outputs, wantOut) {
		t.Errorf("outputs %+v, want %+v", h.outputs, wantOut)
	}
	// After the call, Emit is the call's own again.
	h.outputs = nil
	if err := Emit("", nil); err != nil || len(h.outputs) != 1 || h.outputs[0].index != -1 {
		t.Errorf("Emit after the batch call: %v, outputs %+v; want one call output", err, h.outputs)
	}
}

// TestMessageHandlerOnBatchVerdictRefused: if the host refuses a verdict, the call retries the
// messages left without one instead of letting them end ok.
func TestMessageHandlerOnBatchVerdictRefused(t *testing.T) {
	h := &fakeHost{msgs: batchOf("a"), verdictCode: -5}
	h.install(t)
	Handle(func(*Message) Result { return OK() })
	if got := g.handleBatch(); got != int32(StatusRetry) || !strings.Contains(h.errText, "verdict for batch message 0") {
		t.Fatalf("handleBatch = %d, error %q; want retry naming the refused verdict", got, h.errText)
	}
}

// TestBatchHandlerOnSingleCall: a HandleBatch handler on a wqhost_handle call sees the call's
// batch of one.
func TestBatchHandlerOnSingleCall(t *testing.T) {
	h := &fakeHost{msgs: batchOf("only"), single: true}
	h.install(t)
	HandleBatch(func(b *Batch) Result {
		if b.Len() != 1 || string(b.Message(0).Body()) != "only" || b.Message(0).ID() != "m0" {
			t.Errorf("batch of %d, first body %q", b.Len(), b.Message(0).Body())
		}
		if err := b.Message(0).Reject(errors.New("nope")); err != nil {
			t.Errorf("Reject: %v", err)
		}
		return OK()
	})
	if got := g.handle(); got != 0 {
		t.Fatalf("handle = %d, want the handler's 0 (the verdict replaces it host-side)", got)
	}
	if want := map[int32]fakeVerdict{0: {2, 0, "nope"}}; !reflect.DeepEqual(h.verdicts, want) {
		t.Fatalf("verdicts %+v, want %+v", h.verdicts, want)
	}
}

// TestDispatch: with both kinds registered each export runs its own; with none both reject.
func TestDispatch(t *testing.T) {
	h := &fakeHost{msgs: batchOf("x"), single: true}
	h.install(t)
	if g.handle() != int32(StatusReject) || g.handleBatch() != int32(StatusReject) || !strings.Contains(h.errText, "no handler registered") {
		t.Fatalf("without handlers: error %q, want both exports to reject", h.errText)
	}
	var ran []string
	Handle(func(*Message) Result { ran = append(ran, "message"); return OK() })
	HandleBatch(func(*Batch) Result { ran = append(ran, "batch"); return Retry(0, nil) })
	if got := g.handle(); got != 0 {
		t.Errorf("handle = %d, want the message handler's 0", got)
	}
	if got := g.handleBatch(); got != int32(StatusRetry) {
		t.Errorf("handleBatch = %d, want the batch handler's retry", got)
	}
	if want := []string{"message", "batch"}; !reflect.DeepEqual(ran, want) {
		t.Errorf("ran %v, want %v", ran, want)
	}
}

func TestVerdictErrorText(t *testing.T) {
	for _, tc := range []struct {
		code    int32
		wantErr error
		want    string
	}{
		{-2, ErrDenied, "wqhost: verdict for batch message 2: the message has a verdict already"},
		{-5, ErrInvalid, "wqhost: verdict for batch message 2: no such message in the batch, or an unknown status"},
		{-4, ErrLimit, "wqhost: verdict for batch message 2: wqhost: too many outputs"},
	} {
		h := &fakeHost{msgs: batchOf("a", "b", "c"), verdictCode: tc.code}
		h.install(t)
		err := setVerdict(2, OK())
		var ve *VerdictError
		if !errors.As(err, &ve) || ve.Index != 2 || err.Error() != tc.want || !errors.Is(err, tc.wantErr) {
			t.Errorf("verdict refused with %d: %v, want %q unwrapping to %v", tc.code, err, tc.want, tc.wantErr)
		}
	}
}
