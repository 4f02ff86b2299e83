//go:build !wasip1

package wqhost

// Outside wasip1 there is no host: these stand-ins let handlers compile, vet and unit-test
// natively. They behave like a host with an empty message, an empty batch, no config and no
// output queue. This package's own tests swap in a fake host (native) to exercise the
// dispatch between Handle and HandleBatch; handler packages never see it.

// nativeHost answers the host functions off wasm, one method per wqhost import.
type nativeHost interface {
	bodyLen() int32
	body(dst []byte) int32
	meta(key string, buf []byte) int32
	config(key string, buf []byte) int32
	log(level int32, msg string)
	setError(msg string)
	retryAfter(ms int64)
	emit(queue string, body []byte) int32
	batchSize() int32
	batchBodyLen(i int32) int32
	batchBody(i int32, dst []byte) int32
	batchMeta(i int32, key string, buf []byte) int32
	batchEmit(i int32, queue string, body []byte) int32
	batchVerdict(i, status int32, retryAfterMS int64, reason string) int32
}

// emptyHost is the host of a native build: nothing to read, nowhere to write.
type emptyHost struct{}

func (emptyHost) bodyLen() int32                                 { return 0 }
func (emptyHost) body([]byte) int32                              { return 0 }
func (emptyHost) meta(string, []byte) int32                      { return -1 }
func (emptyHost) config(string, []byte) int32                    { return -1 }
func (emptyHost) log(int32, string)                              {}
func (emptyHost) setError(string)                                {}
func (emptyHost) retryAfter(int64)                               {}
func (emptyHost) emit(string, []byte) int32                      { return -5 }
func (emptyHost) batchSize() int32                               { return 0 }
func (emptyHost) batchBodyLen(int32) int32                       { return -5 }
func (emptyHost) batchBody(int32, []byte) int32                  { return -5 }
func (emptyHost) batchMeta(int32, string, []byte) int32          { return -5 }
func (emptyHost) batchEmit(int32, string, []byte) int32          { return -5 }
func (emptyHost) batchVerdict(int32, int32, int64, string) int32 { return -5 }

var native nativeHost = emptyHost{}

func hostBodyLen() int32                       { return native.bodyLen() }
func hostBody(dst []byte) int32                { return native.body(dst) }
func hostMeta(key string, buf []byte) int32    { return native.meta(key, buf) }
func hostConfig(key string, buf []byte) int32  { return native.config(key, buf) }
func hostLog(level int32, msg string)          { native.log(level, msg) }
func hostSetError(msg string)                  { native.setError(msg) }
func hostRetryAfter(ms int64)                  { native.retryAfter(ms) }
func hostEmit(queue string, body []byte) int32 { return native.emit(queue, body) }
func hostBatchSize() int32                     { return native.batchSize() }
func hostBatchBodyLen(i int32) int32           { return native.batchBodyLen(i) }
func hostBatchBody(i int32, dst []byte) int32  { return native.batchBody(i, dst) }
func hostBatchMeta(i int32, key string, buf []byte) int32 {
	return native.batchMeta(i, key, buf)
}
func hostBatchEmit(i int32, queue string, body []byte) int32 {
	return native.batchEmit(i, queue, body)
}
func hostBatchVerdict(i, status int32, retryAfterMS int64, reason string) int32 {
	return native.batchVerdict(i, status, retryAfterMS, reason)
}
