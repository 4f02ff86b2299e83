package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/wqhost/wqhost/bench/internal/report"
)

// goBench runs `go test -run '^$' -bench pattern` in the wqhost checkout on pkg with extra
// environment and returns its output lines. The figures that only the root module's
// benchmarks can take (they need the runtime's or the host's internals) come this way.
func goBench(ctx context.Context, repo, pkg, pattern string, env []string, args ...string) (string, []string, error) {
	argv := []string{"test", "-run", "^$", "-bench", pattern}
	if !slices.Contains(args, "-count") {
		argv = append(argv, "-count", "1")
	}
	argv = append(argv, args...)
	argv = append(argv, pkg)
	cmd := exec.CommandContext(ctx, "go", argv...)
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var lines []string
	s := bufio.NewScanner(&out)
	for s.Scan() {
		lines = append(lines, strings.TrimSpace(s.Text()))
	}
	shown := "go " + strings.Join(argv, " ")
	if err != nil {
		tail := lines[max(0, len(lines)-5):]
		return shown, lines, fmt.Errorf("%s: %w: %s", shown, err, strings.Join(tail, " | "))
	}
	return shown, lines, nil
}

// timeLimitLine is the summary line the runtime's fuel benchmark prints (BenchmarkFuelCost):
// the worst realistic guest and the worst micro loop.
var timeLimitLine = regexp.MustCompile(`time limit cost: realistic max=([0-9.]+) micro max=([0-9.]+)`)

// fuelCase is a case line of BenchmarkFuelCost, for its ratio with the checks ÷ without.
var fuelCase = regexp.MustCompile(`^BenchmarkFuelCost/([a-z_-]+?)(?:-\d+)?\s.*\s([0-9.]+) x-limit/nolimit`)

// measureTimeLimit runs the runtime's fuel benchmarks and reads the time limit's cost: the
// line `time limit cost: realistic max=R micro max=M cpu="..."` BenchmarkFuelCost prints
// (M is the tight loop figure), each case's ratio, and go heavy's (count-vowels-go). A figure it cannot read stays 0 (the report says "not measured").
func measureTimeLimit(ctx context.Context, repo string) (report.TimeLimitCost, error) {
	cmd, lines, err := goBench(ctx, repo, "./runtime/", "^BenchmarkFuel", nil, "-count", "3")
	tl := parseTimeLimit(lines)
	tl.Command = cmd
	return tl, err
}

// parseTimeLimit reads the time limit's cost from the fuel benchmarks' output: the summary
// line (the last one, with -count), and each case's median over the runs.
func parseTimeLimit(lines []string) report.TimeLimitCost {
	var tl report.TimeLimitCost
	var names []string
	runs := map[string][]float64{}
	for _, l := range lines {
		if m := timeLimitLine.FindStringSubmatch(l); m != nil {
			tl.Realistic, _ = strconv.ParseFloat(m[1], 64)
			tl.TightLoop, _ = strconv.ParseFloat(m[2], 64)
			tl.Output = append(tl.Output, l)
		}
		if m := fuelCase.FindStringSubmatch(l); m != nil {
			v, _ := strconv.ParseFloat(m[2], 64)
			if runs[m[1]] == nil {
				names = append(names, m[1])
			}
			runs[m[1]] = append(runs[m[1]], v)
			tl.Output = append(tl.Output, l)
		}
	}
	for _, n := range names {
		v := runs[n]
		slices.Sort(v)
		tl.Cases = append(tl.Cases, report.TimeLimitCase{Name: n, Ratio: v[len(v)/2]})
		if n == "go-heavy" {
			tl.GoHeavy = v[len(v)/2]
		}
	}
	return tl
}

// densityLine is host's BenchmarkDensity line.
var densityLine = regexp.MustCompile(`^density n=(\d+): ready=([0-9.]+)s rss=([0-9.]+)MiB idle_push_calls_per_hour=([0-9.]+) cold_p50=([0-9.]+)ms rss_idle=([0-9.]+)MiB goroutines=(\d+)`)

// measureDensity runs host's BenchmarkDensity for the given binding counts and idle wait.
func measureDensity(ctx context.Context, repo string, sizes []int, idle string) ([]report.DensityRow, error) {
	var ss []string
	for _, n := range sizes {
		ss = append(ss, strconv.Itoa(n))
	}
	_, lines, err := goBench(ctx, repo, "./host/", "^BenchmarkDensity$",
		[]string{"WQHOST_DENSITY_SIZES=" + strings.Join(ss, ","), "WQHOST_DENSITY_IDLE=" + idle}, "-timeout", "30m")
	rows := parseDensity(lines)
	if err == nil && len(rows) != len(sizes) {
		err = fmt.Errorf("BenchmarkDensity printed %d density lines, want %d", len(rows), len(sizes))
	}
	return rows, err
}

// parseDensity reads BenchmarkDensity's lines, one row per size.
func parseDensity(lines []string) []report.DensityRow {
	var rows []report.DensityRow
	for _, l := range lines {
		m := densityLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		f := func(i int) float64 { v, _ := strconv.ParseFloat(m[i], 64); return v }
		rows = append(rows, report.DensityRow{Bindings: int(f(1)), ReadySeconds: f(2), RSSMiB: f(3), IdleCallsPerHour: f(4), ColdP50Ms: f(5), RSSIdleMiB: f(6), Goroutines: int(f(7))})
	}
	return rows
}
