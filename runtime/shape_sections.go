package runtime

import (
	"errors"
	"fmt"
	"math"
)

// wazero 1.12's decoder allocates by the counts and lengths a module states before it reads
// what they count: a 13-byte module whose data section states 4 billion segments (or a
// segment of 4 GiB, a name of 4 GiB, an element segment of 4 billion entries) ends the
// process with "fatal error: runtime: out of memory", which no recover catches. So the
// pre-scan reads every section it knows and refuses any count or length larger than the
// bytes left to hold it: every entry of every vector takes at least one byte.

// vec reads a vector's count, refusing one larger than the bytes left, and calls entry for
// each element until the first error.
func (r *reader) vec(what string, entry func(i uint32)) {
	n := r.u32()
	if r.err == nil && uint64(n) > uint64(len(r.b)-r.i) {
		r.fail(fmt.Errorf("%s: count %d past the end of its section", what, n))
		return
	}
	for i := uint32(0); i < n && r.err == nil; i++ {
		entry(i)
	}
}

// byteVec skips a vector of bytes (a name, a data segment's contents).
func (r *reader) byteVec(what string) {
	n := r.u32()
	if r.err == nil && uint64(n) > uint64(len(r.b)-r.i) {
		r.fail(fmt.Errorf("%s: length %d past the end of its section", what, n))
		return
	}
	r.bytes(int(n))
}

// constExpr skips a constant expression, up to and including its end.
func (r *reader) constExpr() {
	for r.err == nil {
		op := r.byte()
		if op == 0x0b {
			return
		}
		if _, err := skipImmediates(r, op); err != nil {
			r.fail(fmt.Errorf("constant expression: opcode 0x%02x: %w", op, err))
		}
	}
}

func (r *reader) refType() {
	if t := r.byte(); r.err == nil && t != 0x70 && t != 0x6f {
		r.fail(fmt.Errorf("unknown reference type 0x%02x", t))
	}
}

// scanSection reads a section other than import, function and code (checkShape's own) far
// enough to check every count and length in it.
func scanSection(id byte, payload []byte) error {
	r := &reader{b: payload}
	switch id {
	case secCustom:
		r.byteVec("custom section name")
		r.i = len(r.b) // the rest is the custom section's own
	case secType:
		_, err := funcTypeParams(payload)
		return err
	case secTable:
		r.vec("tables", func(uint32) { r.refType(); r.limits() })
	case 5: // memory
		r.vec("memories", func(uint32) { r.limits() })
	case secGlobal:
		r.vec("globals", func(uint32) {
			if t := r.byte(); r.err == nil && !isValType(t) {
				r.fail(fmt.Errorf("global of unknown type 0x%02x", t))
			}
			r.byte() // mutability
			r.constExpr()
		})
	case secExport:
		r.vec("exports", func(uint32) { r.byteVec("export name"); r.byte(); r.u32() })
	case secStart:
		r.u32()
	case secElem:
		r.vec("element segments", func(i uint32) { scanElem(r, i) })
	case 11: // data
		r.vec("data segments", func(i uint32) {
			switch flags := r.u32(); flags {
			case 0:
				r.constExpr()
			case 1:
			case 2:
				r.u32()
				r.constExpr()
			default:
				r.fail(fmt.Errorf("data segment %d: unknown flags %d", i, flags))
			}
			r.byteVec(fmt.Sprintf("data segment %d", i))
		})
	case 12: // data count
		r.u32()
	case secTag:
		r.vec("tags", func(uint32) { r.byte(); r.u32() })
	default:
		return fmt.Errorf("unknown section id %d", id)
	}
	if r.err == nil && r.i != len(r.b) {
		r.fail(errors.New("trailing bytes"))
	}
	return r.err
}

// scanElem reads element segment i in any of its eight encodings.
func scanElem(r *reader, i uint32) {
	flags := r.u32()
	if flags > 7 {
		r.fail(fmt.Errorf("element segment %d: unknown flags %d", i, flags))
		return
	}
	if flags&2 != 0 && flags&1 == 0 { // an explicit table index
		r.u32()
	}
	if flags&1 == 0 { // active: an offset
		r.constExpr()
	}
	exprs := flags&4 != 0
	if flags&3 != 0 { // an element kind or reference type
		if exprs {
			r.refType()
		} else if k := r.byte(); r.err == nil && k != 0x00 {
			r.fail(fmt.Errorf("element segment %d: unknown element kind 0x%02x", i, k))
		}
	}
	what := fmt.Sprintf("element segment %d", i)
	if exprs {
		r.vec(what, func(uint32) { r.constExpr() })
	} else {
		r.vec(what, func(uint32) { r.u32() })
	}
}

// secTable is the table section's id.
const secTable = 4

// scanTables reads the table section as scanSection does, adding up the elements the
// tables can hold.
func (s *moduleShape) scanTables(payload []byte) error {
	if err := scanSection(secTable, payload); err != nil {
		return err
	}
	r := &reader{b: payload}
	r.vec("tables", func(uint32) {
		r.refType()
		flags := r.byte()
		lo, hi := r.leb(10), uint64(0)
		if flags&1 != 0 {
			hi = r.leb(10)
		} else {
			hi, s.unbounded = lo, true
		}
		s.tableMin = min(s.tableMin+lo, 1<<63)
		s.tableMax = min(s.tableMax+hi, 1<<63)
	})
	return r.err
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
