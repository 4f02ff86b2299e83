package runtime

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// WASI preview 1 under the time limit (charge.go): wazero's implementation, each function
// wrapped to charge the running call. A function whose work grows with a length or count the
// guest passes is handed that work in bounded pieces (random_get, the iovecs of
// fd_read/fd_write/fd_pread/fd_pwrite) or refused past a cap before any of it (path lengths,
// poll_oneoff's subscriptions). The wrappers call wazero's own functions, found through the
// definitions of its compiled host module, so file descriptors, stdio and errors stay
// wazero's.

// WASI errnos the wrappers return themselves.
const (
	errnoFault       = 21
	errnoInval       = 28
	errnoNameTooLong = 37
)

// instantiateWASI instantiates the wrapped WASI preview 1 module in rt.
func instantiateWASI(ctx context.Context, rt wazero.Runtime) error {
	stock, err := wasi_snapshot_preview1.NewBuilder(rt).Compile(ctx)
	if err != nil {
		return err
	}
	defer stock.Close(ctx)
	defs := stock.ExportedFunctions()
	b := rt.NewHostModuleBuilder(wasi_snapshot_preview1.ModuleName)
	for _, name := range slices.Sorted(maps.Keys(defs)) {
		def := defs[name]
		inner, ok := def.GoFunction().(api.GoModuleFunction)
		if !ok {
			return fmt.Errorf("wasi function %s is not a Go module function", name)
		}
		b.NewFunctionBuilder().
			WithGoModuleFunction(wasiCharged(name, def.ParamNames(), inner), def.ParamTypes(), def.ResultTypes()).
			WithParameterNames(def.ParamNames()...).WithResultNames(def.ResultNames()...).
			WithName(name).Export(name)
	}
	_, err = b.Instantiate(ctx)
	return err
}

// wasiCharged wraps WASI function name, whose parameters are named params.
func wasiCharged(name string, params []string, inner api.GoModuleFunction) api.GoModuleFunc {
	switch name {
	case "random_get":
		return randomGet(inner)
	case "fd_read", "fd_write":
		return iovecs(inner, false)
	case "fd_pread", "fd_pwrite":
		return iovecs(inner, true)
	case "poll_oneoff":
		return func(ctx context.Context, m api.Module, s []uint64) {
			st, n := stateOf(ctx), uint32(s[2])
			st.charge(ctx, callCharge)
			if n > maxPollSubscriptions {
				s[0] = errnoInval
				return
			}
			st.charge(ctx, int(n)*iovecCharge)
			inner.Call(ctx, m, s)
		}
	}
	var paths []int // the parameters that are a path's length
	for i, p := range params {
		if strings.HasSuffix(p, "path_len") {
			paths = append(paths, i)
		}
	}
	if len(paths) > 0 {
		return func(ctx context.Context, m api.Module, s []uint64) {
			st := stateOf(ctx)
			st.charge(ctx, callCharge)
			n := 0
			for _, i := range paths {
				if uint32(s[i]) > maxWASIPathBytes {
					s[0] = errnoNameTooLong
					return
				}
				n += int(uint32(s[i]))
			}
			st.charge(ctx, copyCharge(n))
			inner.Call(ctx, m, s)
		}
	}
	// The rest do a bounded amount of work, or work bounded by what the host holds (the
	// arguments and environment it grants, a directory it mounts).
	return func(ctx context.Context, m api.Module, s []uint64) {
		stateOf(ctx).charge(ctx, callCharge)
		inner.Call(ctx, m, s)
	}
}

// randomGet is random_get (buf, buf_len), filled randomPieceBytes at a time.
func randomGet(inner api.GoModuleFunction) api.GoModuleFunc {
	return func(ctx context.Context, m api.Module, s []uint64) {
		st := stateOf(ctx)
		buf, n := uint32(s[0]), uint32(s[1])
		st.charge(ctx, callCharge)
		if n <= randomPieceBytes {
			st.charge(ctx, int(n)*randomByteCharge)
			inner.Call(ctx, m, s)
			return
		}
		if uint64(buf)+uint64(n) > uint64(m.Memory().Size()) {
			s[0] = errnoFault // before filling any of it, as wazero does
			return
		}
		var piece [2]uint64
		for off := uint32(0); off < n; {
			k := min(n-off, randomPieceBytes)
			st.charge(ctx, int(k)*randomByteCharge)
			piece[0], piece[1] = uint64(buf+off), uint64(k)
			inner.Call(ctx, m, piece[:])
			if piece[0] != 0 {
				s[0] = piece[0]
				return
			}
			off += k
		}
		s[0] = 0
	}
}

// iovecs is fd_read, fd_write (fd, iovs, iovs_len, result) or, positional, fd_pread,
// fd_pwrite (fd, iovs, iovs_len, offset, result). A vector of at most iovecPiece iovecs and
// pieceBytes bytes, the common case, goes to wazero whole; a longer one in pieces (iovCall).
func iovecs(inner api.GoModuleFunction, positional bool) api.GoModuleFunc {
	return func(ctx context.Context, m api.Module, s []uint64) {
		st := stateOf(ctx)
		st.charge(ctx, callCharge)
		iovs, count := uint32(s[1]), uint32(s[2])
		tbl, ok := m.Memory().Read(iovs, count*8)
		if !ok || count > 1<<29 {
			s[0] = errnoFault
			return
		}
		if count <= iovecPiece {
			total := 0
			for i := range int(count) {
				total += int(binary.LittleEndian.Uint32(tbl[i*8+4:]))
			}
			if total <= pieceBytes {
				st.charge(ctx, int(count)*iovecCharge+copyCharge(total))
				inner.Call(ctx, m, s)
				return
			}
		}
		c := iovCall{inner: inner, ctx: ctx, m: m, st: st, s: s, tbl: tbl, res: 3}
		if positional {
			c.res = 4
		}
		s[0] = c.run()
	}
}

// iovCall is one fd_read/fd_write-style call handed to wazero in pieces: runs of whole
// iovecs of at most iovecPiece iovecs and pieceBytes bytes, and an iovec longer than
// pieceBytes on its own, pieceBytes at a time (its entry in guest memory rewritten for the
// piece and restored after: the guest is inside this call, and nothing else reads it). As
// readv and writev, it stops at a short transfer; an error after some bytes moved returns
// the count (the error comes with the next call), an error before any returns the error.
type iovCall struct {
	inner api.GoModuleFunction
	ctx   context.Context
	m     api.Module
	st    *callState
	s     []uint64 // the call's parameters; s[0] gets the errno
	tbl   []byte   // the iovec table in guest memory
	res   int      // the parameter index of the result pointer
	done  uint64   // bytes moved so far
}

func (c *iovCall) run() uint64 {
	mem := c.m.Memory()
	resPtr := uint32(c.s[c.res])
	saved, ok := mem.ReadUint32Le(resPtr)
	if !ok {
		return errnoFault
	}
	iovs, count := uint32(c.s[1]), len(c.tbl)/8
	for i := 0; i < count; {
		j, bytes := i, 0
		for j < count && j-i < iovecPiece {
			l := int(binary.LittleEndian.Uint32(c.tbl[j*8+4:]))
			if j > i && bytes+l > pieceBytes {
				break
			}
			bytes += l
			j++
		}
		var errno uint64
		short := false
		if bytes > pieceBytes { // one iovec, j == i+1
			errno, short = c.split(iovs+uint32(i)*8, resPtr, saved)
		} else {
			c.st.charge(c.ctx, (j-i)*iovecCharge+copyCharge(bytes))
			var n uint32
			n, errno = c.piece(iovs+uint32(i)*8, uint32(j-i), resPtr, saved)
			c.done += uint64(n)
			short = int(n) < bytes
		}
		if errno != 0 {
			if c.done == 0 {
				return errno
			}
			break
		}
		if short {
			break
		}
		i = j
	}
	mem.WriteUint32Le(resPtr, uint32(c.done))
	return 0
}

// split hands the iovec whose entry is at entry to wazero pieceBytes at a time.
func (c *iovCall) split(entry, resPtr, saved uint32) (errno uint64, short bool) {
	mem := c.m.Memory()
	orig, _ := mem.ReadUint64Le(entry) // inside tbl
	buf, l := uint32(orig), uint32(orig>>32)
	if uint64(buf)+uint64(l) > uint64(mem.Size()) {
		return errnoFault, false // as wazero refuses it whole, rather than a piece past 4 GiB wrapping to 0
	}
	defer mem.WriteUint64Le(entry, orig)
	for off := uint32(0); off < l; {
		k := min(l-off, pieceBytes)
		c.st.charge(c.ctx, iovecCharge+copyCharge(int(k)))
		mem.WriteUint64Le(entry, uint64(buf+off)|uint64(k)<<32)
		n, errno := c.piece(entry, 1, resPtr, saved)
		c.done += uint64(n)
		if errno != 0 {
			return errno, false
		}
		if n < k {
			return 0, true
		}
		off += k
	}
	return 0, false
}

// piece hands count iovecs at tbl to wazero and returns how many bytes moved. The result
// wazero writes is read and the guest's bytes there restored: they may overlap the table.
func (c *iovCall) piece(tbl, count, resPtr, saved uint32) (uint32, uint64) {
	var p [5]uint64
	p[0], p[1], p[2] = c.s[0], uint64(tbl), uint64(count)
	if c.res == 4 {
		p[3] = c.s[3] + c.done // the offset, moved on by what is done
	}
	p[c.res] = c.s[c.res]
	c.inner.Call(c.ctx, c.m, p[:c.res+1])
	mem := c.m.Memory()
	n, _ := mem.ReadUint32Le(resPtr)
	mem.WriteUint32Le(resPtr, saved)
	if p[0] != 0 {
		return 0, p[0]
	}
	return n, 0
}
