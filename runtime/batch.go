package runtime

import (
	"context"
	"fmt"
	"strings"

	"github.com/tetratelabs/wazero/api"
)

// Batches (docs/abi.md, "Batches"): many messages in one call of wqhost_handle_batch, a
// verdict and outputs for each. Every call has a batch: a single call's is its one message,
// a self test's is empty; the batch_* host functions below read it and set its verdicts.

// BatchOutput is the result of CallBatch: one Result per input, in order (their HTTP and
// Usage are the call's, here).
type BatchOutput struct {
	Messages []Result
	Outputs  []Emitted // the call's own outputs (emit without index); empty unless the call returned 0 without failing
	HTTP     HTTPReport
	// Usage is what the whole call cost, set even when it failed; zero when it never ran.
	Usage Usage
	held  outputHold // the outputs' reservation from the tenant's memory budget
}

// Release gives back what the call's outputs, its own and its messages', reserved from the
// tenant's memory budget: call it once they are sent (or dropped). Idempotent.
func (bo *BatchOutput) Release() { bo.held.release() }

// HandlesBatches reports whether the module exports wqhost_handle_batch, so that a pool of it
// may take PoolConfig.Batch and CallBatch.
func (m *Module) HandlesBatches() bool { return m.c.batch }

// checkBatch refuses a batch binding whose module cannot take batches, at load rather than
// at its first batch.
func (c PoolConfig) checkBatch(m *Module) error {
	switch {
	case !c.Batch:
		return nil
	case m.c.abi == ABIWasiStdio:
		return fmt.Errorf("runtime: binding %s: batch: module %s is a %s module, which cannot export wqhost_handle_batch (batches need abi %s)",
			c.Binding, m.name, ABIWasiStdio, ABIWqhostV1)
	case m.c.abi == ABIExtism:
		return fmt.Errorf("runtime: binding %s: batch: module %s is an %s plugin, which handles one message per call (batches need abi %s)",
			c.Binding, m.name, ABIExtism, ABIWqhostV1)
	case !m.c.batch:
		return fmt.Errorf("runtime: binding %s: batch: module %s does not export wqhost_handle_batch", c.Binding, m.name)
	}
	return nil
}

// CallBatch hands ins to the module's wqhost_handle_batch in one call.
//
// It always returns a BatchOutput with one resolved Result per input (ins must hold no
// nil). The error is non-nil when the call itself failed (trap, time limit, memory limit,
// unknown status, ctx ended, pool closed, instantiation failed, no wqhost_handle_batch
// export): then every message without a verdict of its own carries an Err wrapping it, those
// with one keep it, and the call's own Outputs are empty. An empty ins returns an empty
// result without calling the guest.
func (p *Pool) CallBatch(ctx context.Context, ins []*Input) (*BatchOutput, error) {
	bo := &BatchOutput{Messages: make([]Result, len(ins))}
	if len(ins) == 0 {
		return bo, nil
	}
	who := callee{id: ins[0].ID, n: len(ins)}
	if !p.m.c.batch {
		return bo, bo.failAll(ins, fmt.Errorf("runtime: %s: binding %s: module %s does not export wqhost_handle_batch", who, p.cfg.Binding, p.m.name))
	}
	out := &Result{}
	inst, err := p.checkoutMetered(ctx, who, &out.Usage)
	if err != nil {
		bo.Usage = out.Usage
		return bo, bo.failAll(ins, err)
	}
	st := inst.st
	st.beginBatch(ins, out, bo.Messages)
	rc, discard, err := p.invoke(ctx, inst, inst.batch, who)
	if err == nil && (rc < 0 || rc > 2) {
		err = badStatus(who.String(), rc, out.ErrorText)
	}
	for i := range bo.Messages {
		r := &bo.Messages[i]
		switch {
		case st.vset[i]:
			// A verdict is final: nothing later in the call changes it.
		case err != nil:
			*r = Result{Err: &inBatchError{id: ins[i].ID, err: err}}
		default:
			r.Verdict, r.ErrorText = Verdict(rc), out.ErrorText
			if r.Verdict == VerdictRetry {
				r.RetryAfter = out.RetryAfter
			}
		}
		if r.Err != nil || r.Verdict != VerdictOK {
			r.Outputs = nil
		}
	}
	// The flags are the instance's: read before it goes back to the pool.
	bo.held = st.takeHeld()
	st.end()
	p.checkin(inst, discard)
	if err == nil && rc == 0 {
		bo.Outputs = out.Outputs
	}
	bo.HTTP, bo.Usage = out.HTTP, out.Usage
	return bo, err
}

// failAll fails every message of a call that never ran with err.
func (bo *BatchOutput) failAll(ins []*Input, err error) error {
	for i := range bo.Messages {
		bo.Messages[i] = Result{Err: &inBatchError{id: ins[i].ID, err: err}}
	}
	return err
}

// inBatchError is a batch call's failure as one of its messages reports it: "runtime:
// message m2 in batch of 4 messages from m0: handler trapped: …", naming the message once
// and the batch once.
type inBatchError struct {
	id  string
	err error // the call's, from "runtime: batch of …"
}

func (e *inBatchError) Error() string {
	s := strings.TrimPrefix(e.err.Error(), "runtime: ")
	if strings.HasPrefix(s, "batch of ") {
		return "runtime: message " + e.id + " in " + s
	}
	return "runtime: message " + e.id + ": " + s // not the call's own failure (instantiation)
}

func (e *inBatchError) Unwrap() error { return e.err }

// beginSingle sets up a wqhost_handle call of in: a batch of one, whose outputs are the call's.
func (st *callState) beginSingle(in *Input, out *Result) {
	st.in, st.out = in, out
	st.one[0] = in
	st.batch, st.res, st.vset = st.one[:], st.oneRes[:], st.oneSet[:]
}

// beginBatch sets up a wqhost_handle_batch call of ins, whose verdicts and outputs go to res.
func (st *callState) beginBatch(ins []*Input, out *Result, res []Result) {
	st.in, st.out, st.batch, st.res = nil, out, ins, res
	if cap(st.vbuf) < len(ins) {
		st.vbuf = make([]bool, len(ins))
	}
	st.vset = st.vbuf[:len(ins)]
	clear(st.vset)
}

// end forgets the call, so an idle instance holds no message, reason or output.
func (st *callState) end() {
	st.in, st.out, st.batch, st.res, st.vset = nil, nil, nil, nil, nil
	st.one[0] = nil
	if st.oneSet[0] {
		st.oneRes[0], st.oneSet[0] = Result{}, false
	}
}

// callee names the call st runs: its message, or a batch's first message and size; empty in
// a self test.
func (st *callState) callee() callee {
	switch {
	case st.in != nil:
		return callee{id: st.in.ID}
	case len(st.batch) > 0:
		return callee{id: st.batch[0].ID, n: len(st.batch)}
	}
	return callee{}
}

// index is the batch index i names, if it is one.
func (st *callState) index(i uint64) (int, bool) {
	k := int32(uint32(i))
	if st == nil || k < 0 || int(k) >= len(st.batch) {
		return 0, false
	}
	return int(k), true
}

// message is the batch's message i; nil when i names none.
func (st *callState) message(i uint64) *Input {
	k, ok := st.index(i)
	if !ok {
		return nil
	}
	return st.batch[k]
}

// batchEmit is batch_emit: an output of message i, under that message's limits.
func (st *callState) batchEmit(i uint64, q, body []byte) int32 {
	k, ok := st.index(i)
	if !ok || st.out == nil {
		return errInvalid
	}
	if st.vset[k] {
		// A message with a verdict takes no more outputs.
		return errDenied
	}
	dst := &st.res[k].Outputs
	if st.in != nil {
		// A single call is its message: emit's outputs and batch_emit(0)'s share its limits
		// and its fate.
		dst = &st.out.Outputs
	}
	return st.emit(dst, q, body)
}

// setVerdict is batch_verdict: message i's status, retry delay and reason, set once.
func (st *callState) setVerdict(i uint64, status int32, retryMs int64, reason []byte) int32 {
	k, ok := st.index(i)
	if !ok || status < int32(VerdictOK) || status > int32(VerdictReject) {
		return errInvalid
	}
	if st.vset[k] {
		return errDenied // the first verdict is final
	}
	st.vset[k] = true
	r := &st.res[k]
	r.Verdict, r.ErrorText = Verdict(status), reasonText(reason)
	if r.Verdict == VerdictRetry {
		r.RetryAfter = retryDelay(retryMs)
	}
	return 0
}

// batchHostFuncs are the batch_* host functions of docs/abi.md.
func batchHostFuncs() []hostFn {
	return []hostFn{
		{"batch_size", nil, []api.ValueType{tI32}, func(ctx context.Context, _ api.Module, s []uint64) {
			n := 0
			if st := stateOf(ctx); st != nil {
				st.charge(ctx, callCharge)
				n = len(st.batch)
			}
			s[0] = i32(int32(n))
		}},
		{"batch_body_len", []api.ValueType{tI32}, []api.ValueType{tI32}, func(ctx context.Context, _ api.Module, s []uint64) {
			st := stateOf(ctx)
			st.charge(ctx, callCharge)
			in := st.message(s[0])
			if in == nil {
				s[0] = i32(errInvalid)
				return
			}
			s[0] = i32(int32(len(in.Body)))
		}},
		{"batch_body", []api.ValueType{tI32, tI32, tI32}, []api.ValueType{tI32}, func(ctx context.Context, m api.Module, s []uint64) {
			dst := mem(m, "batch_body", uint32(s[1]), uint32(s[2]))
			st := stateOf(ctx)
			st.charge(ctx, callCharge)
			in := st.message(s[0])
			if in == nil {
				s[0] = i32(errInvalid)
				return
			}
			s[0] = i32(int32(st.copyOut(ctx, dst, in.Body)))
		}},
		{"batch_meta", []api.ValueType{tI32, tI32, tI32, tI32, tI32}, []api.ValueType{tI32}, func(ctx context.Context, m api.Module, s []uint64) {
			key := mem(m, "batch_meta", uint32(s[1]), uint32(s[2]))
			dst := mem(m, "batch_meta", uint32(s[3]), uint32(s[4]))
			st := stateOf(ctx)
			st.charge(ctx, callCharge)
			in := st.message(s[0])
			if in == nil || len(key) > maxMetaKeyBytes {
				s[0] = i32(errInvalid)
				return
			}
			s[0] = i32(st.copyMeta(in, key, dst))
		}},
		{"batch_emit", []api.ValueType{tI32, tI32, tI32, tI32, tI32}, []api.ValueType{tI32}, func(ctx context.Context, m api.Module, s []uint64) {
			q := mem(m, "batch_emit", uint32(s[1]), uint32(s[2]))
			body := mem(m, "batch_emit", uint32(s[3]), uint32(s[4]))
			st := stateOf(ctx)
			st.charge(ctx, callCharge)
			if st == nil {
				s[0] = i32(errInvalid)
				return
			}
			s[0] = i32(st.emitted(st.batchEmit(s[0], q, body)))
		}},
		{"batch_verdict", []api.ValueType{tI32, tI32, tI64, tI32, tI32}, []api.ValueType{tI32}, func(ctx context.Context, m api.Module, s []uint64) {
			reason := mem(m, "batch_verdict", uint32(s[3]), uint32(s[4]))
			st := stateOf(ctx)
			st.charge(ctx, callCharge+copyCharge(min(len(reason), maxLogLine)))
			if st == nil {
				s[0] = i32(errInvalid)
				return
			}
			s[0] = i32(st.setVerdict(s[0], int32(uint32(s[1])), int64(s[2]), reason))
		}},
	}
}
