// Package report turns a benchmark run's results into docs/benchmarks.md and its PNG charts.
package report

import (
	"bufio"
	"os"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/wqhost/wqhost/bench/internal/drain"
	"github.com/wqhost/wqhost/bench/internal/suite"
)

// Results is everything one `wqbench all` run measured.
type Results struct {
	Command   string    `json:"command"`
	Machine   Machine   `json:"machine"`
	Started   time.Time `json:"started"`
	Finished  time.Time `json:"finished"`
	LoadAfter string    `json:"load_after"`
	// CalibrationAfter is Calibrate's figure at the end of the run (Machine has the start's).
	CalibrationAfter float64 `json:"calibration_ns_after,omitempty"`
	// Headline are the like-for-like contests the headline rows read (suite.MeasureHeadline).
	Headline  []suite.Figure     `json:"headline,omitempty"`
	PerCall   []suite.PerCallRow `json:"per_call"`
	Engines   []suite.RunResult  `json:"engines"`
	Consumers []suite.RunResult  `json:"consumers"`
	Scaling   []suite.RunResult  `json:"scaling"`
	Sizes     []suite.RunResult  `json:"sizes"`
	Idle      []suite.IdleRow    `json:"idle"`
	// Drain is the local drain against River and JetStream (bench/internal/drain).
	Drain []drain.Result `json:"drain,omitempty"`
	// DrainFsync is the disk's fsync rate measured in the drain's rounds.
	DrainFsync *drain.Fsync `json:"drain_fsync,omitempty"`
	// DrainLoad are the load averages at the drain's start and end.
	DrainLoad []string `json:"drain_load,omitempty"`
	// TimeLimit is what the fuel time limit costs, measured by the runtime's benchmarks.
	TimeLimit TimeLimitCost `json:"time_limit"`
	// Density is the bindings sweep (host's BenchmarkDensity), one row per size.
	Density []DensityRow `json:"density,omitempty"`
	// Notes are the runs that failed and were left out.
	Notes []string `json:"notes"`
}

// realisticCases are BenchmarkFuelCost's realistic guests, measured against their modules
// unchanged; every other case but go-heavy is a micro loop, measured against its code
// unrolled without checks.
var realisticCases = map[string]bool{
	"billing-go": true, "billing-tinygo": true, "vowels-perchar-go": true,
	"vowels-perchar-tinygo": true, "vowels-rust": true,
}

// Figures are the headline's three: from the cases' medians when there are cases (the worst
// micro loop, the worst realistic guest, and go-heavy), else the fields as the summary line
// gave them. With -count above 1 the summary line is only the last run's; the medians are
// every run's.
func (tl TimeLimitCost) Figures() (micro, realistic, goHeavy float64) {
	if len(tl.Cases) == 0 {
		return tl.TightLoop, tl.Realistic, tl.GoHeavy
	}
	for _, c := range tl.Cases {
		switch {
		case c.Name == "go-heavy":
			goHeavy = c.Ratio
		case realisticCases[c.Name]:
			realistic = max(realistic, c.Ratio)
		default:
			micro = max(micro, c.Ratio)
		}
	}
	return micro, realistic, goHeavy
}

// TimeLimitCase is one case of the runtime's fuel benchmark: with the checks ÷ without.
type TimeLimitCase struct {
	Name  string  `json:"name"`
	Ratio float64 `json:"ratio"`
}

// TimeLimitCost is the time limit's price: the time of the same code with the fuel checks
// divided by its time without them (1 = free). Zero means not measured.
type TimeLimitCost struct {
	// TightLoop is the worst of the tight loops: spec-suite style micro loops and standard
	// Go's loop of one table lookup a pass.
	TightLoop float64 `json:"tight_loop,omitempty"`
	// Realistic is the worst of the realistic guests (billing and per-char vowels in
	// standard Go, TinyGo and Rust), each against its module unchanged.
	Realistic float64 `json:"realistic,omitempty"`
	// GoHeavy is a CPU-heavy standard-Go guest (count-vowels-go).
	GoHeavy float64 `json:"go_heavy,omitempty"`
	// Cases are the benchmark's cases, each its median ratio over the runs, in its order.
	Cases []TimeLimitCase `json:"cases,omitempty"`
	// Command is how they were measured; Output the lines they were read from.
	Command string   `json:"command,omitempty"`
	Output  []string `json:"output,omitempty"`
}

// DensityRow is one size of the bindings sweep (host's BenchmarkDensity line).
type DensityRow struct {
	Bindings         int     `json:"bindings"`
	ReadySeconds     float64 `json:"ready_seconds"`
	RSSMiB           float64 `json:"rss_mib"`
	RSSIdleMiB       float64 `json:"rss_idle_mib"`
	ColdP50Ms        float64 `json:"cold_p50_ms"`
	IdleCallsPerHour float64 `json:"idle_calls_per_hour"`
	Goroutines       int     `json:"goroutines"`
}

// Machine describes where the numbers were taken.
type Machine struct {
	CPU string `json:"cpu"`
	// Family, Model and Stepping are /proc/cpuinfo's: a model name such as "AMD EPYC" covers
	// generations whose cycles differ by several times.
	Family   string `json:"cpu_family,omitempty"`
	Model    string `json:"cpu_model,omitempty"`
	Stepping string `json:"cpu_stepping,omitempty"`
	// MHz is /proc/cpuinfo's "cpu MHz" of the first CPU when the run started.
	MHz       float64 `json:"mhz,omitempty"`
	Cores     int     `json:"cores"`
	MemoryGiB float64 `json:"memory_gib"`
	Kernel    string  `json:"kernel"`
	Go        string  `json:"go"`
	LoadStart string  `json:"load_start"`
	// CalibrationNs is Calibrate's figure when the run started: ns per pass of a counting
	// loop, a figure to scale the others by when comparing machines.
	CalibrationNs float64 `json:"calibration_ns,omitempty"`
}

// Describe reads the machine's description from /proc and the Go runtime, and calibrates.
func Describe() Machine {
	m := Machine{Cores: runtime.NumCPU(), Go: runtime.Version(), LoadStart: LoadAverage()}
	m.CPU = procField("/proc/cpuinfo", "model name")
	m.Family, m.Model, m.Stepping = procField("/proc/cpuinfo", "cpu family"), procField("/proc/cpuinfo", "model"), procField("/proc/cpuinfo", "stepping")
	if _, err := parseFloat(procField("/proc/cpuinfo", "cpu MHz"), &m.MHz); err != nil {
		m.MHz = 0
	}
	m.CalibrationNs = Calibrate()
	if kb := procField("/proc/meminfo", "MemTotal"); kb != "" {
		var n float64
		for _, f := range strings.Fields(kb) {
			if _, err := parseFloat(f, &n); err == nil {
				break
			}
		}
		m.MemoryGiB = n / (1 << 20)
	}
	var u syscall.Utsname
	if syscall.Uname(&u) == nil {
		m.Kernel = utsString(u.Sysname[:]) + " " + utsString(u.Release[:])
	}
	return m
}

// LoadAverage is /proc/loadavg's 1, 5 and 15 minute figures: how busy the machine was.
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

func procField(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		k, v, ok := strings.Cut(s.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func utsString(b []int8) string {
	var sb strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		sb.WriteByte(byte(c))
	}
	return sb.String()
}
