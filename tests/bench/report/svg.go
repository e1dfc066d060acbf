package main

import (
	"fmt"
	"html"
	"math"
	"sort"
	"strings"
)

// Point is one message size of a series: the median and the min–max bar.
type Point struct {
	X         int // message size in bytes
	Y, Lo, Hi float64
}

// Series is one line of a plot.
type Series struct {
	Name   string
	Color  string
	Dashed bool // librxe is dashed, ours solid
	Square bool // marker: square (4 QPs) or circle
	Points []Point
}

// Plot geometry, in SVG user units.
const (
	plotW, plotH         = 900, 520
	marginL, marginR     = 80, 250
	marginT, marginB     = 50, 60
	innerW, innerH       = plotW - marginL - marginR, plotH - marginT - marginB
	legendX, legendLineH = plotW - marginR + 20, 18
)

// PlotSVG draws series on a log2 message-size axis and a log10 value axis.
// Points with a non-positive value are left out (a log axis cannot show them).
func PlotSVG(title, yLabel string, series []Series) string {
	minX, maxX := math.Inf(1), math.Inf(-1)
	minY, maxY := math.Inf(1), math.Inf(-1)
	for _, s := range series {
		for _, p := range s.Points {
			if p.X <= 0 || p.Y <= 0 {
				continue
			}
			minX, maxX = math.Min(minX, math.Log2(float64(p.X))), math.Max(maxX, math.Log2(float64(p.X)))
			lo, hi := p.Lo, p.Hi
			if lo <= 0 {
				lo = p.Y
			}
			if hi <= 0 {
				hi = p.Y
			}
			minY, maxY = math.Min(minY, math.Log10(lo)), math.Max(maxY, math.Log10(hi))
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		plotW, plotH, plotW, plotH)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", plotW, plotH)
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="15" font-weight="bold">%s</text>`+"\n", marginL, html.EscapeString(title))
	if math.IsInf(minX, 0) {
		fmt.Fprintf(&b, `<text x="%d" y="%d">no data</text>`+"\n</svg>\n", marginL, marginT+innerH/2)
		return b.String()
	}
	minX, maxX = math.Floor(minX), math.Ceil(maxX)
	if maxX == minX {
		maxX++
	}
	minY, maxY = math.Floor(minY), math.Ceil(maxY)
	if maxY == minY {
		maxY++
	}
	px := func(size int) float64 {
		return marginL + (math.Log2(float64(size))-minX)/(maxX-minX)*innerW
	}
	py := func(v float64) float64 {
		return marginT + innerH - (math.Log10(v)-minY)/(maxY-minY)*innerH
	}

	// Axes, grid and tick labels.
	fmt.Fprintf(&b, `<g stroke="#ddd">`+"\n")
	for e := minX; e <= maxX; e++ {
		x := px(1 << int(e))
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d"/>`+"\n", x, marginT, x, marginT+innerH)
	}
	for e := minY; e <= maxY; e++ {
		y := py(math.Pow(10, e))
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f"/>`+"\n", marginL, y, marginL+innerW, y)
	}
	b.WriteString("</g>\n")
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="black"/>`+"\n", marginL, marginT, innerW, innerH)
	// Every power of two while they fit, else the even ones (4^k: 64 B, 1 KiB, …).
	step, start := 1.0, minX
	if maxX-minX > 12 {
		step = 2
		start += math.Mod(start, 2)
	}
	for e := start; e <= maxX; e += step {
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n",
			px(1<<int(e)), marginT+innerH+18, strings.ReplaceAll(sizeName(1<<int(e)), " ", "\u00a0"))
	}
	for e := minY; e <= maxY; e++ {
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n",
			marginL-6, py(math.Pow(10, e)), tickValue(math.Pow(10, e)))
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">message size (log2 scale)</text>`+"\n", marginL+innerW/2, plotH-15)
	fmt.Fprintf(&b, `<text transform="translate(20 %d) rotate(-90)" text-anchor="middle">%s</text>`+"\n",
		marginT+innerH/2, html.EscapeString(yLabel))

	// Series: min–max bars, the median line, markers; then the legend.
	for i, s := range series {
		pts := append([]Point(nil), s.Points...)
		sort.Slice(pts, func(a, c int) bool { return pts[a].X < pts[c].X })
		dash := ""
		if s.Dashed {
			dash = ` stroke-dasharray="6 4"`
		}
		fmt.Fprintf(&b, `<g stroke="%s" fill="%s"><title>%s</title>`+"\n", s.Color, s.Color, html.EscapeString(s.Name))
		var path []string
		for _, p := range pts {
			if p.X <= 0 || p.Y <= 0 {
				continue
			}
			x, y := px(p.X), py(p.Y)
			path = append(path, fmt.Sprintf("%.1f,%.1f", x, y))
			if p.Lo > 0 && p.Hi > 0 && p.Hi > p.Lo {
				fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke-width="1"/>`+"\n", x, py(p.Lo), x, py(p.Hi))
			}
			if s.Square {
				fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="7" height="7"/>`+"\n", x-3.5, y-3.5)
			} else {
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3.5"/>`+"\n", x, y)
			}
		}
		if len(path) > 1 {
			fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke-width="2"%s/>`+"\n", strings.Join(path, " "), dash)
		}
		ly := marginT + 10 + i*legendLineH
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke-width="2"%s/>`+"\n", legendX, ly, legendX+30, ly, dash)
		if s.Square {
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="7" height="7"/>`+"\n", legendX+15-3.5, float64(ly)-3.5)
		} else {
			fmt.Fprintf(&b, `<circle cx="%d" cy="%d" r="3.5"/>`+"\n", legendX+15, ly)
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" stroke="none" fill="black" dominant-baseline="middle">%s</text>`+"\n",
			legendX+38, ly, html.EscapeString(s.Name))
		b.WriteString("</g>\n")
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="11" fill="#555">median of the repetitions; bars: min–max</text>`+"\n",
		legendX, marginT+10+len(series)*legendLineH+10)
	b.WriteString("</svg>\n")
	return b.String()
}

// tickValue prints a power of ten without float noise.
func tickValue(v float64) string {
	if v >= 1 {
		return fmt.Sprintf("%.0f", v)
	}
	return strings.TrimRight(fmt.Sprintf("%.6f", v), "0")
}

var toolColors = map[string]string{
	"ib_write_lat": "#1f77b4", "ib_send_lat": "#d62728", "ib_read_lat": "#2ca02c",
	"ib_write_bw": "#1f77b4", "ib_send_bw": "#d62728", "ib_read_bw": "#2ca02c",
}

// SeriesFor builds one series per (tool, QPs, side) from the rows keep selects.
func SeriesFor(rows []Row, keep func(Key) bool, providerName map[string]string) []Series {
	type sk struct {
		tool string
		qps  int
		side string
	}
	by := map[sk]*Series{}
	var order []sk
	for _, r := range Select(rows, keep) {
		for _, side := range []string{SideOurs, SideLibrxe} {
			st := r.Ours
			if side == SideLibrxe {
				st = r.Base
			}
			if st.N == 0 {
				continue
			}
			k := sk{r.Tool, r.QPs, side}
			s, ok := by[k]
			if !ok {
				name := fmt.Sprintf("%s %s", r.Tool, providerName[side])
				if r.QPs > 1 || qpsVary(rows, keep) {
					name = fmt.Sprintf("%s q%d %s", r.Tool, r.QPs, providerName[side])
				}
				color := toolColors[r.Tool]
				if color == "" {
					color = "#555"
				}
				s = &Series{Name: name, Color: color, Dashed: side == SideLibrxe, Square: r.QPs > 1}
				by[k] = s
				order = append(order, k)
			}
			s.Points = append(s.Points, Point{X: r.Size, Y: st.Median, Lo: st.Min, Hi: st.Max})
		}
	}
	sort.SliceStable(order, func(i, j int) bool {
		a, b := order[i], order[j]
		if a.tool != b.tool {
			return a.tool < b.tool
		}
		if a.qps != b.qps {
			return a.qps < b.qps
		}
		return a.side == SideOurs && b.side != SideOurs
	})
	out := make([]Series, 0, len(order))
	for _, k := range order {
		out = append(out, *by[k])
	}
	return out
}

func qpsVary(rows []Row, keep func(Key) bool) bool {
	seen := map[int]bool{}
	for _, r := range Select(rows, keep) {
		seen[r.QPs] = true
	}
	return len(seen) > 1
}
