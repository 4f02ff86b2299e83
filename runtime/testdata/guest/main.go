// Command guest is the wqhost/v1 test fixture. It echoes the body to one output unless the body
// starts with a command word that makes it misbehave in a specific way (see handle).
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

//go:wasmimport wqhost config_get
func configGet(kp, kn, bp, bn uint32) int32

//go:wasmimport wqhost log
func hostLog(level int32, p, n uint32)

//go:wasmimport wqhost set_error
func setError(p, n uint32)

//go:wasmimport wqhost retry_after
func retryAfter(ms int64)

//go:wasmimport wqhost emit
func emit(qp, qn, bp, bn uint32) int32

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

func lookup(f func(kp, kn, bp, bn uint32) int32, key string) (string, bool) {
	n := f(sptr(key), uint32(len(key)), 0, 0)
	if n < 0 {
		return "", false
	}
	buf := make([]byte, n)
	f(sptr(key), uint32(len(key)), ptr(buf), uint32(n))
	return string(buf), true
}

func send(queue string, body []byte) int32 {
	return emit(sptr(queue), uint32(len(queue)), ptr(body), uint32(len(body)))
}

func fail(status int32, text string) int32 {
	setError(sptr(text), uint32(len(text)))
	return status
}

var hoard [][]byte

// asciiVowel[c] is 1 for an ASCII vowel c ("bytes").
var asciiVowel = func() (t [128]uint8) {
	for _, c := range "aeiouAEIOU" {
		t[c] = 1
	}
	return t
}()

//go:wasmexport wqhost_abi_v1
func abiV1() {}

//go:wasmexport wqhost_self_test
func selfTest() int32 {
	if msgBodyLen() != 0 {
		return 1
	}
	return 0
}

//go:wasmexport wqhost_handle
func handle() int32 {
	body := make([]byte, msgBodyLen())
	msgBody(ptr(body), uint32(len(body)))
	cmd, arg, _ := strings.Cut(string(body), ":")
	switch cmd {
	case "trap":
		var p *int
		return int32(*p)
	case "loop":
		for {
		}
	case "bomb":
		for {
			hoard = append(hoard, make([]byte, 16<<20))
		}
	case "grow":
		n, _ := strconv.Atoi(arg)
		hoard = append(hoard, make([]byte, n<<20))
		return 0
	case "oob":
		return msgBody(0xFFFFFF00, 4096)
	case "status":
		n, _ := strconv.Atoi(arg)
		return int32(n)
	case "retry":
		n, _ := strconv.Atoi(arg)
		retryAfter(int64(n))
		return fail(1, "try later")
	case "reject":
		return fail(2, arg)
	case "meta":
		var sb strings.Builder
		for _, k := range []string{"id", "queue", "tenant", "binding", "dequeue_count", "inserted_at", "order_key", "nope"} {
			v, ok := lookup(msgMeta, k)
			if !ok {
				v = "<none>"
			}
			fmt.Fprintf(&sb, "%s=%s\n", k, v)
		}
		send("", []byte(sb.String()))
		return 0
	case "config":
		v, ok := lookup(configGet, arg)
		if !ok {
			v = "<none>"
		}
		send("", []byte(v))
		return 0
	case "multi":
		n, _ := strconv.Atoi(arg)
		for i := 0; i < n; i++ {
			if rc := send(fmt.Sprintf("q%d", i), []byte(strconv.Itoa(i))); rc != 0 {
				return fail(2, fmt.Sprintf("emit=%d", rc))
			}
		}
		return 0
	case "emitto":
		if rc := send(arg, []byte("x")); rc != 0 {
			return fail(2, fmt.Sprintf("emit=%d", rc))
		}
		return 0
	case "bytes":
		// One pass of a Go loop per byte, each through the function's jump table: standard
		// Go's worst case for the time limit's checks (BenchmarkFuelCost).
		n := 0
		for i := 0; i < len(arg); i++ {
			if c := arg[i]; c < 0x80 {
				n += int(asciiVowel[c])
			}
		}
		send("", strconv.AppendInt(nil, int64(n), 10))
		return 0
	case "log":
		hostLog(4, sptr(arg), uint32(len(arg)))
		fmt.Println("stdout:" + arg)
		return 0
	}
	send("", body)
	return 0
}

func main() {}
