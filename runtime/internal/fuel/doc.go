// Package fuel is the guest side of wqhost's time limit: a rewriter that takes a valid
// WebAssembly module's bytes and returns them with a fuel counter added (Instrument). The
// host side (the yield function, metering, the cache of instrumented modules) is runtime's.
//
// # Why a fuel counter
//
// The time limit without wazero's close-on-context-done. That option (wazero 1.12) starts a
// watchdog goroutine per call and makes compiled code leave for Go at every loop back-edge
// (wazero issue #2466), which made CPU-bound guests several times slower. Instead a module
// is instrumented once at load with a fuel counter: one mutable i32 global, which each
// function keeps in a local of its own while it runs (loaded at its entry and after every
// call, stored back before every call and wherever it returns), charged at every function
// entry and loop header,
//
//	block
//	  block
//	    local.get  $f      ;; global.get $fuel at the function's entry
//	    i32.const  <charge>
//	    i32.sub
//	    local.tee  $f
//	    i32.const  0
//	    i32.lt_s
//	    br_if 0            ;; out of fuel
//	    br 1
//	  end
//	  call $yield          ;; the host: ends the call if its time is up, else refills the fuel
//	  local.set $f
//	end
//
// which compiles to a subtraction and a branch on a register, not taken (version 3 kept the
// fuel in the global alone, a load, a store and a load more per check, and wrote the yield
// in an if, which wazero lays out in the way of the common path: 3.0× on a counting loop,
// 1.15× on the CPU-heavy Go guest; see BenchmarkFuelCost). A function whose every loop
// calls keeps the fuel in the global instead (the local is then a temporary): the fuel
// would go through the global at each call anyway, and the spills would cost more than the
// checks save (callFreeLoop). Small innermost loops are unrolled, their header's check run
// and charged once per 4 to 32 passes, its yield after the loop (emit.go), and a
// function whose entry runs straight into a loop's check, or a small one that calls nothing, charges at its entry
// without a test (untestedEntry). A small function with no loop and no call (a leaf) is
// charged by its direct callers instead: their calls go to a copy of it without checks, and
// count its code as theirs, so a loop calling it neither spills its fuel nor pays a second
// load-charge-store of the global per pass (leaf.go; version 8's `call` case of
// BenchmarkFuelCost ran about 2× on a 2 GHz EPYC). The global is what the host and the other functions see;
// a trap leaves a function's last charges in its local, and ends the call. When the fuel
// runs out the guest calls the host's yield function (an import the instrumenter adds),
// which traps the call when its time limit has passed or its caller's context has ended,
// and otherwise returns a new allowance.
//
// # Why a call into the host
//
// Why a call into Go rather than a flag the host sets: compiled guest code cannot be
// preempted by the Go scheduler. With as many spinning guests as GOMAXPROCS, no goroutine,
// timer or AfterFunc would ever run again to set a flag (wazero's own check leaves for Go at
// every loop iteration for the same reason). The yield call gives the scheduler a point to
// preempt the goroutine, every Refill units at most.
//
// # What a check charges
//
// Checks go at every function entry and loop header, and inside long stretches of code: a
// check charges 1 plus one unit per ChargeBytes bytes of the most code that can run before
// the next check on any path, plus BulkCharge per bulk memory operation (or memory.grow) on
// it, with no cap below a whole allowance. Straight-line code, big if arms and huge loop
// bodies get a check every SegmentBytes at most (body.go), so no stretch between
// two checks runs for long and each pays for what it runs: a guest returns to the host after
// about Refill small loop iterations or Refill*ChargeBytes bytes of straight-line
// code (a millisecond or two) however its code is shaped. The old scheme charged only at
// function entries and loop headers, capped at 64 units: a 1.8 MB function called in a loop
// ran 2.9 s under a 1 s limit.
//
// # What the rewriter expects
//
// Instrument expects valid WebAssembly: runtime's Engine.Compile validates a module (the checker) before
// it instruments it, and the instrumented bytes are validated again when a tenant compiles
// them, falling back to close-on-context-done if they fail (runtime's errInstrumentedInvalid). The
// rewriter itself refuses what instrumenting could make valid: a reference one past the
// module's own globals, types or a function's locals, which would land on the fuel global,
// the yield type or the fuel local (no function index can land on the yield import: the
// ones at or above it move up). A module the decoder cannot read (exception tags, GC
// types) is left as it is and runs under close-on-context-done as before.
//
// # Placing the checks (body.go)
//
// Where a function body gets its fuel checks and what each charges. A body is decoded
// into instructions with their control structure, then walked
// backwards computing, for every instruction, the most code that can run from it before
// the next check along any path (divisions and square roots, bulk memory operations weigh
// more than their bytes): control only moves forward (to a block's end, an if's
// else arm) except to a loop header, which always has a check, so this is one pass with
// every branch target already known. A check goes
//
//   - at the function's entry and at every loop header (calls and back edges),
//   - before an instruction whose cost would exceed SegmentBytes (long straight-line code,
//     big arms and loop bodies: a check every few KiB, so no stretch between two checks runs
//     long), and
//   - where a loop is left (after its end, or after the end of an outer block a branch
//     inside it leaves to) when more than exitBytes follow before the next check, so a hot
//     loop's header check does not pay for the code after the loop at every iteration,
//
// and charges the cost it resets, in units of ChargeBytes. A check is stack-neutral and
// valid between any two instructions.
//
// # Unrolling small loops (emit.go)
//
// A check is a subtraction and a branch not taken, which in a loop of a few
// instructions costs as much again as the loop itself (a counting loop ran 2.0× with a
// check per pass). So an innermost loop whose body is small (unrollBytes of code at most, no
// check inside it but its header's, at least one branch back to it, no parameters or
// results) runs a group of passes per check, written out one after the other:
//
//	block              ;; $exit, added
//	  loop             ;; $re, added: where the loop starts again after a yield
//	    block          ;; $slow, added
//	      loop         ;; the original loop
//	        test       ;; the fuel less G (the group's charge); below zero: br $slow
//	        block      ;; the first pass: a branch to the loop goes on to the next pass
//	          body     ;; branches out of the loop four labels further
//	          refund   ;; falling off the body's end leaves the loop, as it did, and gives
//	          br $exit ;; back the passes of the group it did not run
//	        end
//	        block ... end  ;; the next passes, likewise
//	        body       ;; the last pass as it was (branches out three labels further)
//	      end
//	      br $exit
//	    end
//	    call $yield    ;; out of fuel: the allowance plus G, as the test charges G again
//	    br $re
//	  end
//	end
//
// The header's test charges what a check always charges, the most code that can run before
// the next one: a group of passes. A run of the loop that falls off its body within a group
// gets the passes it did not run back (on that exit path only); one that leaves by a branch
// out has paid up to a group's passes ahead, a few units once per run of the loop. The yield
// is out of the loop's way: wazero lays code out in the order of the module, and a yield
// inside the loop made every group jump over it (a counting loop of sixteen passes a group
// ran 1.4× its code unrolled without checks on a 2 GHz EPYC, 1.04–1.19× with the yield
// after the loop). The passes charge nothing themselves: version 8 charged each pass with a
// subtraction of its own (a counting loop 1.49× in instructions counted by callgrind). What
// unrolling adds to a function is at most the function's own size plus one largest loop's
// copies, so a module's code grows by a bounded factor, as with the checks themselves.
//
// # Leaves charged by their callers (leaf.go)
//
// Small leaf functions called directly are charged by their callers. A loop calling a
// small function used to pay twice per pass: the callee's entry
// charge and the loop's check, each a load, a subtraction and a store of the fuel global
// (a function that calls keeps its fuel there), chained through memory: the `call` case of
// BenchmarkFuelCost ran 1.94-2.03x on a 2 GHz EPYC.
//
// A leaf here is a defined function with no loop, no call of any kind (nor memory.fill or
// memory.copy, which are calls to the bulk helpers) and at most leafBytes of code on its
// longest path (divisions and bulk operations weighed as the checks weigh them, so
// memory.grow alone exceeds it). Such a function runs a bounded amount of code and cannot
// recurse. Each leaf that some function calls directly gets a copy with no check, appended
// after the module's own functions (and the bulk helpers), and every direct call of the leaf
// calls the copy instead; the call site counts the leaf's code as its own, so the caller's
// checks charge it and the invariant of the checks holds as before: no path runs more than
// SegmentBytes of code between two checks, each charging what may run before the next. Such
// a call reads and writes no fuel, so the caller does not spill its fuel local around it,
// and a loop whose calls are all to leaves keeps its fuel in a register and can be
// unrolled. The original keeps its entry charge for every other way in (exports, tables,
// ref.func, the start function), where no caller's check has counted it.
//
// # Bulk memory
//
// memory.fill and memory.copy run in the engine, not in guest code,
// and a constant charge per operation let one call move up to the whole memory limit: a
// loop filling 1 GiB a pass ran 5.7 s under a 2 s limit (32 passes an allowance). So in a
// module with a memory each memory.fill and memory.copy becomes a call to one of two helper
// functions the instrumenter appends after the module's own, which charge the fuel global
// one unit per 16 bytes of the length (as the host's functions charge a copy), yield
// when the fuel runs out, and then do the operation: a loop of them yields every allowance
// of bytes, and one operation of any length at most once before it runs. A trap inside the
// operation is the same trap, one frame deeper.
package fuel
