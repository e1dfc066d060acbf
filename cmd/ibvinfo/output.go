package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// printer writes human output: section titles, aligned tables and
// optional colour.
type printer struct {
	w     io.Writer
	color bool
	err   error
}

func (p *printer) printf(format string, a ...any) {
	if p.err != nil {
		return
	}
	_, p.err = fmt.Fprintf(p.w, format, a...)
}

func (p *printer) section(title string) {
	p.printf("%s\n", p.paint(bold, title))
}

// table prints rows with aligned columns, indented by two spaces. Colour
// codes would upset tabwriter's widths, so tables are never coloured.
func (p *printer) table(header []string, rows [][]string) {
	if p.err != nil || len(rows) == 0 {
		return
	}
	tw := tabwriter.NewWriter(p.w, 0, 0, 2, ' ', 0)
	line := func(cells []string) {
		fmt.Fprintf(tw, "  %s\n", strings.Join(cells, "\t"))
	}
	if header != nil {
		line(header)
	}
	for _, r := range rows {
		line(r)
	}
	p.err = tw.Flush()
}

// ANSI SGR codes.
const (
	bold   = "1"
	red    = "31"
	green  = "32"
	yellow = "33"
	dim    = "2"
)

func (p *printer) paint(code, s string) string {
	if !p.color {
		return s
	}
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// orDash shows "-" for an unknown value.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
