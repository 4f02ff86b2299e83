package fuel

import "github.com/wqhost/wqhost/runtime/internal/wasmbin"

// appendCheck appends the fuel check (see the package doc) with the given charge, on the fuel local
// fl of the function it goes in; at the function's entry (entry) the check reads the fuel
// global instead, which sets the local. The charge is written as a 5-byte LEB128: all of a
// module's checks differ only in those 5 bytes and the local's index.
func (x *fuelIndex) appendCheck(b []byte, fl, charge uint32, entry bool) []byte {
	b = append(b, 0x02, 0x40, 0x02, 0x40) // block, block
	if entry {
		b = append(b, 0x23) // global.get
		b = wasmbin.AppendU32(b, x.fuel)
	} else {
		b = append(b, 0x20) // local.get
		b = wasmbin.AppendU32(b, fl)
	}
	b = append(b, 0x41)
	b = wasmbin.AppendS32Padded(b, int32(charge))
	b = append(b, 0x6b, 0x22) // i32.sub, local.tee
	b = wasmbin.AppendU32(b, fl)
	// The yield banks a whole allowance, whatever the global holds (fuelRefilled): storing
	// the local first would meter the last one to the unit, but costs the counting loop 9%
	// (1.09x against 1.007x), through what it does to the loop's registers.
	b = append(b, 0x41, 0x00, 0x48, 0x0d, 0x00, 0x0c, 0x01, 0x0b, 0x10) // i32.const 0, i32.lt_s, br_if 0, br 1, end, call
	b = wasmbin.AppendU32(b, x.yield)
	b = append(b, 0x21) // local.set
	b = wasmbin.AppendU32(b, fl)
	return append(b, 0x0b)
}

// appendFastCheck appends the test of an unrolled loop's header (emit.go): the
// charge on the fuel local fl and a branch, when that runs the fuel out, to the yield the
// loop has after its end.
func (x *fuelIndex) appendFastCheck(b []byte, fl, charge uint32) []byte {
	b = append(b, 0x20) // local.get
	b = wasmbin.AppendU32(b, fl)
	b = append(b, 0x41)
	b = wasmbin.AppendS32Padded(b, int32(charge))
	b = append(b, 0x6b, 0x22) // i32.sub, local.tee
	b = wasmbin.AppendU32(b, fl)
	return append(b, 0x41, 0x00, 0x48, 0x0d, 0x01) // i32.const 0, i32.lt_s, br_if $slow
}

// appendGlobalFastCheck is appendFastCheck in global mode: on the fuel global, with the
// fuel local fl as a temporary.
func (x *fuelIndex) appendGlobalFastCheck(b []byte, fl, charge uint32) []byte {
	b = append(b, 0x23) // global.get
	b = wasmbin.AppendU32(b, x.fuel)
	b = append(b, 0x41)
	b = wasmbin.AppendS32Padded(b, int32(charge))
	b = append(b, 0x6b, 0x22) // i32.sub, local.tee
	b = wasmbin.AppendU32(b, fl)
	b = append(b, 0x24) // global.set
	b = wasmbin.AppendU32(b, x.fuel)
	b = append(b, 0x20) // local.get
	b = wasmbin.AppendU32(b, fl)
	return append(b, 0x41, 0x00, 0x48, 0x0d, 0x01) // i32.const 0, i32.lt_s, br_if $slow
}

// appendLocalCharge appends a charge to the fuel local fl without a test (a negative one
// gives fuel back: an unrolled loop left within a group, emit.go).
func (x *fuelIndex) appendLocalCharge(b []byte, fl, charge uint32) []byte {
	b = append(b, 0x20) // local.get
	b = wasmbin.AppendU32(b, fl)
	b = append(b, 0x41)
	b = wasmbin.AppendS32(b, int32(charge))
	b = append(b, 0x6b, 0x21) // i32.sub, local.set
	return wasmbin.AppendU32(b, fl)
}

// appendSpill appends the store of the fuel local fl to the fuel global, before a call or
// where the function is left.
func (x *fuelIndex) appendSpill(b []byte, fl uint32) []byte {
	b = append(b, 0x20)
	b = wasmbin.AppendU32(b, fl)
	b = append(b, 0x24)
	return wasmbin.AppendU32(b, x.fuel)
}

// appendEntryCharge appends the fuel global's load into the fuel local fl less charge,
// without a test: a function's entry when a loop's check follows (untestedEntry).
func (x *fuelIndex) appendEntryCharge(b []byte, fl, charge uint32) []byte {
	b = append(b, 0x23)
	b = wasmbin.AppendU32(b, x.fuel)
	b = append(b, 0x41)
	b = wasmbin.AppendS32Padded(b, int32(charge))
	b = append(b, 0x6b, 0x21) // i32.sub, local.set
	return wasmbin.AppendU32(b, fl)
}

// appendGlobalCheck appends the check of a function in global mode (callFreeLoop): on the
// fuel global, with the fuel local fl as a temporary.
func (x *fuelIndex) appendGlobalCheck(b []byte, fl, charge uint32) []byte {
	b = append(b, 0x02, 0x40, 0x02, 0x40, 0x23) // block, block, global.get
	b = wasmbin.AppendU32(b, x.fuel)
	b = append(b, 0x41)
	b = wasmbin.AppendS32Padded(b, int32(charge))
	b = append(b, 0x6b, 0x22) // i32.sub, local.tee
	b = wasmbin.AppendU32(b, fl)
	b = append(b, 0x24) // global.set
	b = wasmbin.AppendU32(b, x.fuel)
	b = append(b, 0x20) // local.get
	b = wasmbin.AppendU32(b, fl)
	b = append(b, 0x41, 0x00, 0x48, 0x0d, 0x00, 0x0c, 0x01, 0x0b, 0x10) // i32.const 0, i32.lt_s, br_if 0, br 1, end, call
	b = wasmbin.AppendU32(b, x.yield)
	b = append(b, 0x24) // global.set
	b = wasmbin.AppendU32(b, x.fuel)
	return append(b, 0x0b)
}

// appendGlobalCharge appends a charge to the fuel global without a test: an entry
// (untestedEntry) in global mode, or a benchmark's pad (Options).
func (x *fuelIndex) appendGlobalCharge(b []byte, charge uint32) []byte {
	b = append(b, 0x23)
	b = wasmbin.AppendU32(b, x.fuel)
	b = append(b, 0x41)
	b = wasmbin.AppendS32Padded(b, int32(charge))
	b = append(b, 0x6b, 0x24) // i32.sub, global.set
	return wasmbin.AppendU32(b, x.fuel)
}

// appendReload appends the load of the fuel global into the fuel local fl, after a call.
func (x *fuelIndex) appendReload(b []byte, fl uint32) []byte {
	b = append(b, 0x23)
	b = wasmbin.AppendU32(b, x.fuel)
	b = append(b, 0x21)
	return wasmbin.AppendU32(b, fl)
}
