// Command batchguest is the wqhost/v1 batch test fixture. wqhost_handle_batch and
// wqhost_handle run the same script: each message's body is a list of steps separated by
// ";", run in the batch's order, message by message:
//
//	ok | retry MS | reject WHY    batch_verdict of this message (status 0, 1, 2)
//	verdict STATUS                batch_verdict with any status
//	verdictat I                   batch_verdict(I, ok): another message's, or none
//	emit [QUEUE]                  batch_emit of this message's body (read with batch_body)
//	emitat I                      batch_emit to message I
//	big N                         batch_emit of N bytes
//	none                          nothing: the message follows the call's status
//	trap | spin | oob             unreachable; an endless loop; batch_body at a pointer
//	                              outside memory
//	callstatus N                  the call returns N (default 0)
//	callretry MS | callerror WHY  retry_after; set_error
//	callemit [BODY] | callbig N   emit (the call's own output)
//	probe                         records what batch_size, msg_body_len, msg_body,
//	                              msg_meta and batch_meta answer
//	log TEXT                      a log line
//	report                        at the end, emit to queue "report" every step's return code
//
// Steps that call a host function record its return code; "report" sends them, one line
// per message ("i: step=rc ..."), as the call's own output.
package main

import (
	"fmt"
	"strconv"
	"strings"
	"unsafe"
)

//go:wasmimport wqhost msg_body_len
func msgBodyLen() int32

//go:wasmimport wqhost msg_body
func msgBody(ptr, n uint32) int32

//go:wasmimport wqhost msg_meta
func msgMeta(kp, kn, bp, bn uint32) int32

//go:wasmimport wqhost log
func hostLog(level int32, p, n uint32)

//go:wasmimport wqhost set_error
func setError(p, n uint32)

//go:wasmimport wqhost retry_after
func retryAfter(ms int64)

//go:wasmimport wqhost emit
func emit(qp, qn, bp, bn uint32) int32

//go:wasmimport wqhost batch_size
func batchSize() int32

//go:wasmimport wqhost batch_body_len
func batchBodyLen(i int32) int32

//go:wasmimport wqhost batch_body
func batchBody(i int32, p, n uint32) int32

//go:wasmimport wqhost batch_meta
func batchMeta(i int32, kp, kn, bp, bn uint32) int32

//go:wasmimport wqhost batch_emit
func batchEmit(i int32, qp, qn, bp, bn uint32) int32

//go:wasmimport wqhost batch_verdict
func batchVerdict(i, status int32, retryMs int64, rp, rn uint32) int32

func ptr(b []byte) uint32 {
	if len(b) == 0 {
		return 0
	}
	return uint32(uintptr(unsafe.Pointer(&b[0])))
}

func sptr(s string) uint32 {
	if len(s) == 0 {
		return 0
	}
	return uint32(uintptr(unsafe.Pointer(unsafe.StringData(s))))
}

func verdict(i, status int32, ms int64, why string) int32 {
	return batchVerdict(i, status, ms, sptr(why), uint32(len(why)))
}

func emitTo(i int32, queue string, body []byte) int32 {
	return batchEmit(i, sptr(queue), uint32(len(queue)), ptr(body), uint32(len(body)))
}

// meta reads a metadata key through f (msg_meta, or batch_meta of one message).
func meta(f func(kp, kn, bp, bn uint32) int32, key string) string {
	n := f(sptr(key), uint32(len(key)), 0, 0)
	if n < 0 {
		return strconv.Itoa(int(n))
	}
	buf := make([]byte, n)
	f(sptr(key), uint32(len(key)), ptr(buf), uint32(n))
	return string(buf)
}

func body(i int32) []byte {
	n := batchBodyLen(i)
	if n <= 0 {
		return nil
	}
	b := make([]byte, n)
	batchBody(i, ptr(b), uint32(n))
	return b
}

var sink int

//go:wasmexport wqhost_abi_v1
func abiV1() {}

// wqhost_self_test passes only if the self test sees an empty batch that takes no verdict.
//
//go:wasmexport wqhost_self_test
func selfTest() int32 {
	if batchSize() != 0 || msgBodyLen() != 0 || verdict(0, 0, 0, "") != -5 || emitTo(0, "", nil) != -5 {
		return 1
	}
	return 0
}

//go:wasmexport wqhost_handle
func handle() int32 { return run() }

//go:wasmexport wqhost_handle_batch
func handleBatch() int32 { return run() }

func run() int32 {
	status := int32(0)
	report := false
	var lines []string
	n := batchSize()
	for i := int32(0); i < n; i++ {
		b := body(i)
		if len(b) == 0 {
			continue
		}
		var rcs []string
		for _, step := range strings.Split(string(b), ";") {
			cmd, arg, _ := strings.Cut(strings.TrimSpace(step), " ")
			rc, ok := int32(0), true
			switch cmd {
			case "ok":
				rc = verdict(i, 0, 0, "")
			case "retry":
				ms, _ := strconv.ParseInt(arg, 10, 64)
				rc = verdict(i, 1, ms, "retry "+arg)
			case "reject":
				rc = verdict(i, 2, 0, arg)
			case "verdict":
				s, _ := strconv.Atoi(arg)
				rc = verdict(i, int32(s), 0, "verdict "+arg)
			case "verdictat":
				j, _ := strconv.Atoi(arg)
				rc = verdict(int32(j), 0, 0, "")
			case "emit":
				rc = emitTo(i, arg, b)
			case "emitat":
				j, _ := strconv.Atoi(arg)
				rc = emitTo(int32(j), "", []byte("x"))
			case "big":
				k, _ := strconv.Atoi(arg)
				rc = emitTo(i, "", make([]byte, k))
			case "trap":
				panic("trap requested")
			case "spin":
				for {
					sink++
				}
			case "oob":
				rc = batchBody(i, 0xFFFFFF00, 4096)
			case "callstatus":
				s, _ := strconv.Atoi(arg)
				status = int32(s)
				ok = false
			case "callretry":
				ms, _ := strconv.ParseInt(arg, 10, 64)
				retryAfter(ms)
				ok = false
			case "callerror":
				setError(sptr(arg), uint32(len(arg)))
				ok = false
			case "callemit":
				rc = emit(0, 0, sptr(arg), uint32(len(arg)))
			case "callbig":
				k, _ := strconv.Atoi(arg)
				big := make([]byte, k)
				rc = emit(0, 0, ptr(big), uint32(k))
			case "probe":
				mb := make([]byte, 8)
				rcs = append(rcs, fmt.Sprintf("size=%d msg_body_len=%d msg_body=%d msg_id=%s msg_tenant=%s msg_binding=%s id=%s queue=%s dequeue_count=%s nope=%s",
					n, msgBodyLen(), msgBody(ptr(mb), 8), meta(msgMeta, "id"), meta(msgMeta, "tenant"), meta(msgMeta, "binding"),
					meta(func(kp, kn, bp, bn uint32) int32 { return batchMeta(i, kp, kn, bp, bn) }, "id"),
					meta(func(kp, kn, bp, bn uint32) int32 { return batchMeta(i, kp, kn, bp, bn) }, "queue"),
					meta(func(kp, kn, bp, bn uint32) int32 { return batchMeta(i, kp, kn, bp, bn) }, "dequeue_count"),
					meta(func(kp, kn, bp, bn uint32) int32 { return batchMeta(i, kp, kn, bp, bn) }, "nope")))
				ok = false
			case "log":
				hostLog(0, sptr(arg), uint32(len(arg)))
				ok = false
			case "report":
				report = true
				ok = false
			case "none":
				ok = false
			default:
				rcs = append(rcs, "unknown step "+cmd)
				ok = false
			}
			if ok {
				rcs = append(rcs, fmt.Sprintf("%s=%d", cmd, rc))
			}
		}
		lines = append(lines, fmt.Sprintf("%d: %s", i, strings.Join(rcs, " ")))
	}
	if report {
		text := strings.Join(lines, "\n")
		emit(sptr("report"), 6, sptr(text), uint32(len(text)))
	}
	return status
}

func main() {}
