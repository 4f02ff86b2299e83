package report

import (
	"fmt"
	"strings"
	"time"
)

// calibrationPasses is the length of one calibration round: about 4 ms at one pass a cycle on
// a 2.5 GHz core, long enough to time, short enough that on a busy machine some of the
// calibrationRounds run undisturbed (the fastest is kept).
const (
	calibrationPasses = 10_000_000
	calibrationRounds = 20
)

// Calibrate is the time of one pass of a counting loop (an add, an increment, a compare and
// a branch: about one cycle a pass on a current core), the fastest of calibrationRounds rounds,
// in ns. It
// says how fast this machine runs simple code when the run is taken, so that figures taken
// on different machines (or on one machine under different loads) can be put side by side.
func Calibrate() float64 {
	best := time.Duration(1 << 62)
	for range calibrationRounds {
		start := time.Now()
		sum := countLoop(calibrationPasses)
		best = min(best, time.Since(start))
		if sum != calibrationPasses*(calibrationPasses-1)/2 { // also keeps the loop's result live
			return 0
		}
	}
	return float64(best.Nanoseconds()) / calibrationPasses
}

//go:noinline
func countLoop(n int) int {
	s := 0
	for i := 0; i < n; i++ {
		s += i
	}
	return s
}

// MachineLine is the one-line description of the machine and its load that the report puts
// beside every table, and the measuring commands print first.
func MachineLine(m Machine, loadEnd string, calEnd float64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "machine: cpu=%q", m.CPU)
	if m.Family != "" {
		fmt.Fprintf(&b, " family=%s model=%s stepping=%s", m.Family, m.Model, m.Stepping)
	}
	if m.MHz > 0 {
		fmt.Fprintf(&b, " mhz=%.0f", m.MHz)
	} else {
		b.WriteString(" mhz=not-recorded")
	}
	fmt.Fprintf(&b, " cores=%d", m.Cores)
	if m.CalibrationNs > 0 {
		fmt.Fprintf(&b, " calibration=%.3fns/pass", m.CalibrationNs)
	} else {
		b.WriteString(" calibration=not-measured")
	}
	if calEnd > 0 {
		fmt.Fprintf(&b, " (end %.3f)", calEnd)
	}
	fmt.Fprintf(&b, " load=%q", m.LoadStart)
	if loadEnd != "" {
		fmt.Fprintf(&b, " load-end=%q", loadEnd)
	}
	return b.String()
}

// machineNote is MachineLine as a line of markdown, under a table.
func machineNote(r *Results) string {
	return fmt.Sprintf("\n<sub>%s</sub>\n", MachineLine(r.Machine, r.LoadAfter, r.CalibrationAfter))
}
