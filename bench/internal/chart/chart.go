// Package chart renders the benchmark results as PNG charts with gonum/plot: grouped bars on
// a log scale (values that span six orders of magnitude, from the Go floor to
// instantiate-per-message) and lines for the sweeps.
package chart

import (
	"fmt"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Series is one named set of bars, one value per group (0 = no bar).
type Series struct {
	Name   string
	Values []float64
}

// Size of every chart.
const (
	width  = 8 * vg.Inch
	height = 4.5 * vg.Inch
)

// LogBars draws groups of bars, one bar per series in each group, with a log10 value axis
// labelled by unit (e.g. "ns" or "msg/s"), and saves a PNG.
func LogBars(file, title, unit string, groups []string, series []Series) error {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = unit + " (log scale)"
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range series {
		for _, v := range s.Values {
			if v > 0 {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
	}
	if math.IsInf(lo, 1) {
		return fmt.Errorf("chart %s: no data", file)
	}
	base := math.Floor(math.Log10(lo))
	top := math.Ceil(math.Log10(hi))
	if top == base {
		top++
	}
	// About 500 points of plot width share the groups; bars fill 80% of each group.
	bw := vg.Points(math.Min(40, 500/float64(max(len(groups), 1))*0.8/float64(max(len(series), 1))))
	for i, s := range series {
		vals := make(plotter.Values, len(groups))
		for j := range groups {
			if j < len(s.Values) && s.Values[j] > 0 {
				// Bars rise from 10^base, so the smallest value still shows.
				vals[j] = math.Log10(s.Values[j]) - base + 0.05
			}
		}
		b, err := plotter.NewBarChart(vals, bw)
		if err != nil {
			return fmt.Errorf("chart %s: %w", file, err)
		}
		b.Color = plotutil.Color(i)
		b.LineStyle.Width = 0
		b.Offset = vg.Length(float64(i)-float64(len(series)-1)/2) * bw
		p.Add(b)
		p.Legend.Add(s.Name, b)
	}
	var ticks []plot.Tick
	for e := base; e <= top; e++ {
		ticks = append(ticks, plot.Tick{Value: e - base, Label: magnitude(math.Pow(10, e), unit)})
	}
	p.Y.Tick.Marker = plot.ConstantTicks(ticks)
	// Headroom above the tallest bar keeps the legend clear of the bars.
	p.Y.Min, p.Y.Max = 0, (top-base)*1.35+0.2
	p.Add(plotter.NewGrid())
	p.NominalX(groups...)
	p.X.Min, p.X.Max = -0.5, float64(len(groups))-0.5
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.Padding = vg.Points(2)
	return p.Save(width, height, file)
}

// magnitude labels a power of ten in the unit, shortened for time.
func magnitude(v float64, unit string) string {
	if unit == "ns" {
		switch {
		case v >= 1e9:
			return fmt.Sprintf("%g s", v/1e9)
		case v >= 1e6:
			return fmt.Sprintf("%g ms", v/1e6)
		case v >= 1e3:
			return fmt.Sprintf("%g µs", v/1e3)
		default:
			return fmt.Sprintf("%g ns", v)
		}
	}
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%gM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%gk", v/1e3)
	default:
		return fmt.Sprintf("%g", v)
	}
}

// Line is one named curve.
type Line struct {
	Name string
	X, Y []float64
	// Ideal draws the curve as a dashed reference line without points: what the measured
	// curve would be if cost grew exactly with the work.
	Ideal bool
}

// Lines draws curves (and dashed ideal lines, see Line.Ideal) with a log x axis labelled at the given ticks and a y axis that is
// linear from zero, or logarithmic with logY, and saves a PNG.
func Lines(file, title, xlabel, ylabel string, xticks []float64, xtickLabel func(float64) string, logY bool, lines []Line) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xlabel
	p.Y.Label.Text = ylabel
	p.X.Scale = plot.LogScale{}
	var ticks []plot.Tick
	for _, x := range xticks {
		ticks = append(ticks, plot.Tick{Value: x, Label: xtickLabel(x)})
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.Y.Min = 0
	if logY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
		p.Y.Label.Text += " (log scale)"
	}
	n := 0
	for _, l := range lines {
		if len(l.X) == 0 || l.Ideal {
			continue
		}
		pts := make(plotter.XYs, len(l.X))
		for i := range l.X {
			pts[i].X, pts[i].Y = l.X[i], l.Y[i]
			if logY && pts[i].Y <= 0 {
				return fmt.Errorf("chart %s: %s: value %g at x=%g cannot go on a log scale", file, l.Name, pts[i].Y, pts[i].X)
			}
		}
		// Measured curves are solid, each with its colour and marker; dashes mean ideal.
		ln, sc, err := plotter.NewLinePoints(pts)
		if err != nil {
			return fmt.Errorf("chart %s: %s: %w", file, l.Name, err)
		}
		ln.Color, sc.Color, sc.Shape = plotutil.Color(n), plotutil.Color(n), plotutil.Shape(n)
		p.Add(ln, sc)
		p.Legend.Add(l.Name, ln, sc)
		n++
	}
	if n == 0 {
		return fmt.Errorf("chart %s: no data", file)
	}
	// An ideal line takes the colour of the measured line before it in lines.
	measured := 0
	for _, l := range lines {
		if len(l.X) == 0 {
			continue
		}
		if !l.Ideal {
			measured++
			continue
		}
		pts := make(plotter.XYs, len(l.X))
		for i := range l.X {
			pts[i].X, pts[i].Y = l.X[i], l.Y[i]
		}
		ln, err := plotter.NewLine(pts)
		if err != nil {
			return fmt.Errorf("chart %s: %s: %w", file, l.Name, err)
		}
		ln.Color = plotutil.Color(max(measured-1, 0))
		ln.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(ln)
		p.Legend.Add(l.Name, ln)
	}
	if logY {
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, l := range lines {
			for _, y := range l.Y {
				lo, hi = math.Min(lo, y), math.Max(hi, y)
			}
		}
		p.Y.Min, p.Y.Max = math.Pow(10, math.Floor(math.Log10(lo))), math.Pow(10, math.Ceil(math.Log10(hi))+0.3)
	}
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	return p.Save(width, height, file)
}
