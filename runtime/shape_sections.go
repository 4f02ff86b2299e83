package runtime

import (
	"errors"
	"fmt"
	"math"

	"github.com/wqhost/wqhost/runtime/internal/wasmbin"
)

// wazero 1.12's decoder allocates by the counts and lengths a module states before it reads
// what they count: a 13-byte module whose data section states 4 billion segments (or a
// segment of 4 GiB, a name of 4 GiB, an element segment of 4 billion entries) ends the
// process with "fatal error: runtime: out of memory", which no recover catches. So the
// pre-scan reads every section it knows and refuses any count or length larger than the
// bytes left to hold it: every entry of every vector takes at least one byte.

// scanSection reads a section other than import, function and code (checkShape's own) far
// enough to check every count and length in it.
func scanSection(id byte, payload []byte) error {
	r := &wasmbin.Reader{Buf: payload}
	switch id {
	case wasmbin.SecCustom:
		r.ByteVec("custom section name")
		r.Pos = len(r.Buf) // the rest is the custom section's own
	case wasmbin.SecType:
		_, err := wasmbin.FuncTypeParams(payload)
		return err
	case wasmbin.SecTable:
		r.Vec("tables", func(uint32) { r.RefType(); r.Limits() })
	case wasmbin.SecMemory:
		r.Vec("memories", func(uint32) { r.Limits() })
	case wasmbin.SecGlobal:
		r.Vec("globals", func(uint32) {
			if t := r.Byte(); r.Err == nil && !wasmbin.IsValType(t) {
				r.Fail(fmt.Errorf("global of unknown type 0x%02x", t))
			}
			r.Byte() // mutability
			r.ConstExpr()
		})
	case wasmbin.SecExport:
		r.Vec("exports", func(uint32) { r.ByteVec("export name"); r.Byte(); r.U32() })
	case wasmbin.SecStart:
		r.U32()
	case wasmbin.SecElem:
		r.Vec("element segments", func(i uint32) { scanElem(r, i) })
	case wasmbin.SecData:
		r.Vec("data segments", func(i uint32) {
			switch flags := r.U32(); flags {
			case 0:
				r.ConstExpr()
			case 1:
			case 2:
				r.U32()
				r.ConstExpr()
			default:
				r.Fail(fmt.Errorf("data segment %d: unknown flags %d", i, flags))
			}
			r.ByteVec(fmt.Sprintf("data segment %d", i))
		})
	case wasmbin.SecDataCount:
		r.U32()
	case wasmbin.SecTag:
		r.Vec("tags", func(uint32) { r.Byte(); r.U32() })
	default:
		return fmt.Errorf("unknown section id %d", id)
	}
	if r.Err == nil && r.Pos != len(r.Buf) {
		r.Fail(errors.New("trailing bytes"))
	}
	return r.Err
}

// scanElem reads element segment i in any of its eight encodings.
func scanElem(r *wasmbin.Reader, i uint32) {
	flags := r.U32()
	if flags > 7 {
		r.Fail(fmt.Errorf("element segment %d: unknown flags %d", i, flags))
		return
	}
	if flags&2 != 0 && flags&1 == 0 { // an explicit table index
		r.U32()
	}
	if flags&1 == 0 { // active: an offset
		r.ConstExpr()
	}
	exprs := flags&4 != 0
	if flags&3 != 0 { // an element kind or reference type
		if exprs {
			r.RefType()
		} else if k := r.Byte(); r.Err == nil && k != 0x00 {
			r.Fail(fmt.Errorf("element segment %d: unknown element kind 0x%02x", i, k))
		}
	}
	what := fmt.Sprintf("element segment %d", i)
	if exprs {
		r.Vec(what, func(uint32) { r.ConstExpr() })
	} else {
		r.Vec(what, func(uint32) { r.U32() })
	}
}

// scanTables reads the table section as scanSection does, adding up the elements the
// tables can hold.
func (s *moduleShape) scanTables(payload []byte) error {
	if err := scanSection(wasmbin.SecTable, payload); err != nil {
		return err
	}
	r := &wasmbin.Reader{Buf: payload}
	r.Vec("tables", func(uint32) {
		r.RefType()
		flags := r.Byte()
		lo, hi := r.LEB(10), uint64(0)
		if flags&1 != 0 {
			hi = r.LEB(10)
		} else {
			hi, s.unbounded = lo, true
		}
		s.tableMin = min(s.tableMin+lo, 1<<63)
		s.tableMax = min(s.tableMax+hi, 1<<63)
	})
	return r.Err
}

// checkTables refuses tables that can hold more than MaxTableElements together, or grow
// without end: at their minima if the code never grows a table, else at their maxima.
func (s *moduleShape) checkTables(l CompileLimits) error {
	limit := uint64(l.MaxTableElements)
	switch {
	case !s.tableGrow && s.tableMin > limit:
		return &CapError{Cap: "max_table_elements", Limit: l.MaxTableElements, Got: s.tableMin, Function: -1,
			Why: "the elements of the module's tables together"}
	case s.tableGrow && s.unbounded:
		return &CapError{Cap: "max_table_elements", Limit: l.MaxTableElements, Got: math.MaxUint32, Function: -1,
			Why: "a table without a maximum, and table.grow in the code: declare the table's maximum"}
	case s.tableGrow && s.tableMax > limit:
		return &CapError{Cap: "max_table_elements", Limit: l.MaxTableElements, Got: s.tableMax, Function: -1,
			Why: "the elements of the module's tables together at their maxima, with table.grow in the code"}
	}
	return nil
}
