// Command hostile is a wqhost/v1 test fixture for the fault suite: besides echoing its body to
// the binding's output queue it misbehaves with its output when the body says so:
//
//	huge:N    emits one output of N MiB (beyond any sane max_output_bytes); rejects with the
//	          emit return code when the host refuses it
//	spam:N    emits N outputs to the binding's output queue; rejects at the first refusal
//	flood:N   writes N MiB to stdout (captured and capped by the host), then echoes
package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"unsafe"
)

//go:wasmimport wqhost msg_body_len
func msgBodyLen() int32

//go:wasmimport wqhost msg_body
func msgBody(ptr, n uint32) int32

//go:wasmimport wqhost set_error
func setError(p, n uint32)

//go:wasmimport wqhost emit
func emit(qp, qn, bp, bn uint32) int32

func ptr(b []byte) uint32 {
	if len(b) == 0 {
		return 0
	}
	return uint32(uintptr(unsafe.Pointer(&b[0])))
}

func send(body []byte) int32 { return emit(0, 0, ptr(body), uint32(len(body))) }

func reject(text string) int32 {
	b := []byte(text)
	setError(ptr(b), uint32(len(b)))
	return 2
}

//go:wasmexport wqhost_abi_v1
func abiV1() {}

//go:wasmexport wqhost_handle
func handle() int32 {
	body := make([]byte, msgBodyLen())
	msgBody(ptr(body), uint32(len(body)))
	cmd, arg, _ := strings.Cut(string(body), ":")
	n, _ := strconv.Atoi(arg)
	switch cmd {
	case "huge":
		if rc := send(make([]byte, n<<20)); rc != 0 {
			return reject(fmt.Sprintf("huge output of %d MiB refused: emit=%d", n, rc))
		}
		return 0
	case "spam":
		for i := 0; i < n; i++ {
			if rc := send([]byte(strconv.Itoa(i))); rc != 0 {
				return reject(fmt.Sprintf("output %d refused: emit=%d", i, rc))
			}
		}
		return 0
	case "flood":
		line := []byte(strings.Repeat("x", 1023) + "\n")
		for i := 0; i < n<<10; i++ {
			os.Stdout.Write(line)
		}
	}
	if rc := send(body); rc != 0 {
		return reject(fmt.Sprintf("echo refused: emit=%d", rc))
	}
	return 0
}

func main() {}
