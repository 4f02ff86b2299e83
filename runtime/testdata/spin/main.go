// Command spin is the time-limit fixture, built by both Go (spin-go.wasm) and TinyGo
// (spin-tinygo.wasm): a body of "loop" never returns, "recurse" recurses without end, "sleep"
// sleeps for an hour, any other body returns OK.
package main

import "time"

//go:wasmimport wqhost msg_body_len
func msgBodyLen() int32

//go:wasmexport wqhost_abi_v1
func abiV1() {}

var sink int32

//go:noinline
func recurse(n int32) int32 {
	sink += n
	if msgBodyLen() == 0 { // never, so the recursion has no end the compiler could find
		return 0
	}
	return recurse(n+1) + 1
}

//go:wasmexport wqhost_handle
func handle() int32 {
	switch msgBodyLen() {
	case 4: // "loop"
		for {
			sink++
		}
	case 5: // "sleep"
		time.Sleep(time.Hour)
	case 7: // "recurse"
		sink = recurse(0)
	}
	return 0
}

func main() {}
