package main

import (
	"bytes"
	"io"
	"strings"

	"github.com/mattn/go-runewidth"
)

// table lays out tab-separated lines in columns by their display width on a terminal, so that Chinese
// and other East-Asian wide characters (two cells each) stay aligned; text/tabwriter counts one per rune.
// Write lines with cells separated by tabs, then Flush.
type table struct {
	w   io.Writer
	buf bytes.Buffer
}

// newTable returns a table writing to w, with two spaces between columns.
func newTable(w io.Writer) *table { return &table{w: w} }

func (t *table) Write(p []byte) (int, error) { return t.buf.Write(p) }

// Flush writes the buffered lines, each cell but the last padded to its column's width.
func (t *table) Flush() error {
	if t.buf.Len() == 0 {
		return nil
	}
	var rows [][]string
	var widths []int
	for _, line := range strings.Split(strings.TrimSuffix(t.buf.String(), "\n"), "\n") {
		cells := strings.Split(line, "\t")
		for i, c := range cells {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], runewidth.StringWidth(c))
		}
		rows = append(rows, cells)
	}
	t.buf.Reset()
	var out strings.Builder
	for _, cells := range rows {
		for i, c := range cells {
			if i == len(cells)-1 {
				out.WriteString(c)
				break
			}
			out.WriteString(c)
			out.WriteString(strings.Repeat(" ", widths[i]-runewidth.StringWidth(c)+2))
		}
		out.WriteByte('\n')
	}
	_, err := io.WriteString(t.w, out.String())
	return err
}
