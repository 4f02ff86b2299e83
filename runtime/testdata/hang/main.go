// Command hang is a wqhost/v1 module whose start function (_initialize, which runs package
// init) never returns: a host must refuse to load it within a bounded time instead of hanging.
package main

//go:wasmimport wqhost msg_body_len
func msgBodyLen() int32

var spins uint64

func init() {
	for {
		spins++
	}
}

//go:wasmexport wqhost_abi_v1
func abiV1() {}

//go:wasmexport wqhost_handle
func handle() int32 { return msgBodyLen() * 0 }

func main() {}
