//go:build !wasip1

package wqhost

// Outside wasip1 there is no host: these stand-ins let handlers compile, vet and unit-test
// natively. They behave like a host with an empty message, no config and no output queue.

func hostBodyLen() int32                       { return 0 }
func hostBody(dst []byte) int32                { return 0 }
func hostMeta(key string, buf []byte) int32    { return -1 }
func hostConfig(key string, buf []byte) int32  { return -1 }
func hostLog(level int32, msg string)          {}
func hostSetError(msg string)                  {}
func hostRetryAfter(ms int64)                  {}
func hostEmit(queue string, body []byte) int32 { return -5 }
