//go:build !wasip1

package http

// Outside wasip1 there is no host: every request is refused as by a binding without an
// http: policy, so handlers compile and unit-test natively.

func hostRequest(method, url string, headers, body []byte, cred string) int32 { return -2 }
func hostStatus(h int32) int32                                                { return -5 }
func hostBodyRead(h int32, buf []byte) int32                                  { return -5 }
func hostHeader(h int32, name string) string                                  { return "" }
func hostLastError() string {
	return "no wqhost host (not built for wasip1)"
}
