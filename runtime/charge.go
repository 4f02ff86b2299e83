package runtime

import (
	"context"
	"errors"
	goruntime "runtime"

	"github.com/tetratelabs/wazero/sys"
)

// Host calls under the time limit. The fuel counter (package fuel) charges guest code, and a
// loop whose body is one host call pays only for its few instructions, however much the call
// does: 64 MiB of random_get, a 1 MiB msg_body, a million iovecs. So every host function
// charges the running call for its own work too, on an account of its own (callState.work),
// and once checkBudget units are spent it does what wqhost_yield does (checkpoint): it ends
// the call at its time limit or when its caller's context ends, and hands the processor to
// the host's other goroutines every schedSlice. A unit is about a nanosecond of host work on
// a slow machine; the common call, a handful of host calls per message, spends a few hundred
// units and never reaches a check.
//
// Work that grows with a length or count the guest passes is done in pieces of a bounded
// size (pieceBytes, randomPieceBytes, iovecPiece), each charged before it starts, so no host
// call does more than about checkBudget units of work plus one piece between two checks.
// Lengths that have no business being large (a metadata key, a header name, a WASI path) are
// refused by a small cap before anything is read or converted. docs/abi.md ("Host calls and
// the time limit") lists the caps and the charges.
const (
	// checkBudget is the work between two checks of the call's limits: about 100 µs.
	checkBudget = 100_000
	// callCharge is what every host call costs before its own work: a loop of the cheapest
	// calls reaches a check every checkBudget/callCharge calls.
	callCharge = 64
	// pieceBytes is how much a host call copies between two looks at the budget.
	pieceBytes = 64 << 10
	// randomPieceBytes is how much of random_get is filled at once: random bytes cost far
	// more than copied ones (about 10 ns each where getrandom is a system call).
	randomPieceBytes = 4 << 10
	randomByteCharge = 10
	// iovecPiece is how many iovecs one piece of fd_read/fd_write hands to WASI, each
	// charged iovecCharge on top of its bytes.
	iovecPiece  = 256
	iovecCharge = 64
	// logLineCharge is a line written to the host's log (log, a refused request's warning).
	logLineCharge = 4_000
	// requestCharge is an outbound request, refused or sent: a URL parsed, a policy matched,
	// possibly a warning logged. Its wait for the network is bounded by the deadline itself.
	requestCharge = 20_000
)

// Caps on lengths the guest passes, checked before the bytes are read or converted.
const (
	// maxMetaKeyBytes caps msg_meta's and batch_meta's key: the longest key is 13 bytes.
	maxMetaKeyBytes = 64
	// maxHTTPNameBytes caps http_header's header name and http_request's credential name.
	maxHTTPNameBytes = 256
	// maxHTTPMethodBytes caps http_request's method.
	maxHTTPMethodBytes = 32
	// maxWASIPathBytes caps every WASI path argument (PATH_MAX): longer is ENAMETOOLONG.
	maxWASIPathBytes = 4096
	// maxPollSubscriptions caps poll_oneoff's subscriptions: more is EINVAL.
	maxPollSubscriptions = 4096
)

// copyCharge is what copying n bytes between guest memory and the host costs.
func copyCharge(n int) int { return n / 16 }

// charge adds n units of host work to the running call's account and, once checkBudget units
// are spent, checks the call's limits and yields (checkpoint). It is the fast path of every
// host function: an addition and a comparison. A call without a state (a host function run
// outside any pool) is not charged.
func (st *callState) charge(ctx context.Context, n int) {
	if st == nil {
		return
	}
	st.work += n
	if st.work >= checkBudget {
		st.checkpoint(ctx)
	}
}

// checkpoint is what wqhost_yield does, for the host functions too: it ends the call (by a
// panic wazero turns into the call's error) when its time is up or its caller's context
// ended, and yields the processor when the call has run for schedSlice since its last turn.
// ctx is the context the host function was called with: an instance not armed with limits
// (the close-on-context-done runtime, wasi-stdio) is stopped by ending that context, which
// ends the call as wazero itself would at the guest's next loop.
func (st *callState) checkpoint(ctx context.Context) {
	st.workDone += int64(st.work)
	st.work = 0
	if st.pool == nil || st.pool.t == nil {
		return // host functions driven outside any tenant (tests): no clock, no limits
	}
	now := st.clock()
	if err := st.overdue(now); err != nil {
		panic(err)
	}
	if st.caller == nil {
		if err := ctx.Err(); err != nil {
			panic(ctxExit(err))
		}
	}
	if now-st.turn >= schedSlice {
		goruntime.Gosched()
		st.turn = st.pool.t.e.since()
	}
}

// ctxExit is the exit error wazero's close-on-context-done ends a call with when its context
// ended with err, so the call fails the same way whether the guest or the host noticed first.
func ctxExit(err error) *sys.ExitError {
	if errors.Is(err, context.DeadlineExceeded) {
		return sys.NewExitError(sys.ExitCodeDeadlineExceeded)
	}
	return sys.NewExitError(sys.ExitCodeContextCanceled)
}

// copyOut copies src to dst a piece at a time, charging each piece, and returns the number of
// bytes copied: msg_body and batch_body.
func (st *callState) copyOut(ctx context.Context, dst, src []byte) int {
	n := min(len(dst), len(src))
	for off := 0; off < n; off += pieceBytes {
		end := min(off+pieceBytes, n)
		st.charge(ctx, copyCharge(end-off))
		copy(dst[off:end], src[off:end])
	}
	return n
}
