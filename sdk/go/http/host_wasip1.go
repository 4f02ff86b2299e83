//go:build wasip1

package http

import "unsafe"

//go:wasmimport wqhost http_request
//go:noescape
func abiRequest(mp unsafe.Pointer, mn int32, up unsafe.Pointer, un int32, hp unsafe.Pointer, hn int32, bp unsafe.Pointer, bn int32, cp unsafe.Pointer, cn int32) int32

//go:wasmimport wqhost http_status
func abiStatus(h int32) int32

//go:wasmimport wqhost http_header
//go:noescape
func abiHeader(h int32, np unsafe.Pointer, nn int32, bp unsafe.Pointer, bn int32) int32

//go:wasmimport wqhost http_body_read
//go:noescape
func abiBodyRead(h int32, bp unsafe.Pointer, bn int32) int32

//go:wasmimport wqhost http_error
//go:noescape
func abiError(bp unsafe.Pointer, bn int32) int32

// wqhostFeatureHTTPv1 is the marker the host checks before it lets a module import the
// functions above.
//
//go:wasmexport wqhost_feature_http_v1
func wqhostFeatureHTTPv1() {}

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

func hostRequest(method, url string, headers, body []byte, cred string) int32 {
	return abiRequest(stringPtr(method), int32(len(method)), stringPtr(url), int32(len(url)),
		bytesPtr(headers), int32(len(headers)), bytesPtr(body), int32(len(body)), stringPtr(cred), int32(len(cred)))
}

func hostStatus(h int32) int32 { return abiStatus(h) }

func hostBodyRead(h int32, buf []byte) int32 { return abiBodyRead(h, bytesPtr(buf), int32(len(buf))) }

func hostHeader(h int32, name string) string {
	n := abiHeader(h, stringPtr(name), int32(len(name)), nil, 0)
	if n <= 0 {
		return ""
	}
	buf := make([]byte, n)
	abiHeader(h, stringPtr(name), int32(len(name)), bytesPtr(buf), n)
	return string(buf)
}

func hostLastError() string {
	n := abiError(nil, 0)
	if n <= 0 {
		return ""
	}
	buf := make([]byte, n)
	abiError(bytesPtr(buf), n)
	return string(buf)
}
