//go:build wasip1

package wqhost

import "unsafe"

//go:wasmimport wqhost msg_body_len
func abiMsgBodyLen() int32

//go:wasmimport wqhost msg_body
//go:noescape
func abiMsgBody(ptr unsafe.Pointer, n int32) int32

//go:wasmimport wqhost msg_meta
//go:noescape
func abiMsgMeta(keyPtr unsafe.Pointer, keyLen int32, bufPtr unsafe.Pointer, bufLen int32) int32

//go:wasmimport wqhost config_get
//go:noescape
func abiConfigGet(keyPtr unsafe.Pointer, keyLen int32, bufPtr unsafe.Pointer, bufLen int32) int32

//go:wasmimport wqhost log
//go:noescape
func abiLog(level int32, ptr unsafe.Pointer, n int32)

//go:wasmimport wqhost set_error
//go:noescape
func abiSetError(ptr unsafe.Pointer, n int32)

//go:wasmimport wqhost retry_after
func abiRetryAfter(ms int64)

//go:wasmimport wqhost emit
//go:noescape
func abiEmit(queuePtr unsafe.Pointer, queueLen int32, bodyPtr unsafe.Pointer, bodyLen int32) int32

//go:wasmimport wqhost batch_size
func abiBatchSize() int32

//go:wasmimport wqhost batch_body_len
func abiBatchBodyLen(i int32) int32

//go:wasmimport wqhost batch_body
//go:noescape
func abiBatchBody(i int32, ptr unsafe.Pointer, n int32) int32

//go:wasmimport wqhost batch_meta
//go:noescape
func abiBatchMeta(i int32, keyPtr unsafe.Pointer, keyLen int32, bufPtr unsafe.Pointer, bufLen int32) int32

//go:wasmimport wqhost batch_emit
//go:noescape
func abiBatchEmit(i int32, queuePtr unsafe.Pointer, queueLen int32, bodyPtr unsafe.Pointer, bodyLen int32) int32

//go:wasmimport wqhost batch_verdict
//go:noescape
func abiBatchVerdict(i, status int32, retryAfterMS int64, reasonPtr unsafe.Pointer, reasonLen int32) int32

//go:wasmexport wqhost_abi_v1
func wqhostABIv1() {}

//go:wasmexport wqhost_handle
func wqhostHandle() int32 { return g.handle() }

//go:wasmexport wqhost_handle_batch
func wqhostHandleBatch() int32 { return g.handleBatch() }

//go:wasmexport wqhost_self_test
func wqhostSelfTest() int32 { return g.selfTestStatus() }

// bytesPtr returns the address of b's first byte, or nil for an empty slice (the host reads
// nothing for a zero length, so the address does not matter).
func bytesPtr(b []byte) unsafe.Pointer {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Pointer(&b[0])
}

func stringPtr(s string) unsafe.Pointer {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Pointer(unsafe.StringData(s))
}

func hostBodyLen() int32 { return abiMsgBodyLen() }

func hostBody(dst []byte) int32 { return abiMsgBody(bytesPtr(dst), int32(len(dst))) }

func hostMeta(key string, buf []byte) int32 {
	return abiMsgMeta(stringPtr(key), int32(len(key)), bytesPtr(buf), int32(len(buf)))
}

func hostConfig(key string, buf []byte) int32 {
	return abiConfigGet(stringPtr(key), int32(len(key)), bytesPtr(buf), int32(len(buf)))
}

func hostLog(level int32, msg string) { abiLog(level, stringPtr(msg), int32(len(msg))) }

func hostSetError(msg string) { abiSetError(stringPtr(msg), int32(len(msg))) }

func hostRetryAfter(ms int64) { abiRetryAfter(ms) }

func hostEmit(queue string, body []byte) int32 {
	return abiEmit(stringPtr(queue), int32(len(queue)), bytesPtr(body), int32(len(body)))
}

func hostBatchSize() int32 { return abiBatchSize() }

func hostBatchBodyLen(i int32) int32 { return abiBatchBodyLen(i) }

func hostBatchBody(i int32, dst []byte) int32 {
	return abiBatchBody(i, bytesPtr(dst), int32(len(dst)))
}

func hostBatchMeta(i int32, key string, buf []byte) int32 {
	return abiBatchMeta(i, stringPtr(key), int32(len(key)), bytesPtr(buf), int32(len(buf)))
}

func hostBatchEmit(i int32, queue string, body []byte) int32 {
	return abiBatchEmit(i, stringPtr(queue), int32(len(queue)), bytesPtr(body), int32(len(body)))
}

func hostBatchVerdict(i, status int32, retryAfterMS int64, reason string) int32 {
	return abiBatchVerdict(i, status, retryAfterMS, stringPtr(reason), int32(len(reason)))
}
