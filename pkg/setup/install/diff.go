package install

import (
	"bytes"
	"fmt"
	"strings"
)

// diffContext is how many unchanged lines surround each hunk, as diff -u.
const diffContext = 3

// Diff renders a change for a dry run: a unified diff (as `diff -u`) of a
// file's old and new content, /dev/null standing for a missing side, or
// the change's one line for a symlink. No change gives "".
func Diff(c Change) string {
	if c.Link != "" {
		return c.String() + "\n"
	}
	from, to, newData := c.Path, c.Path, c.New
	if c.Old == nil {
		from = "/dev/null"
	}
	if c.Remove || c.New == nil {
		to, newData = "/dev/null", nil
	}
	hunks := unified(splitLines(c.Old), splitLines(newData))
	if hunks == "" {
		return ""
	}
	return "--- " + from + "\n+++ " + to + "\n" + hunks
}

// splitLines splits after each newline; the last line may lack one.
func splitLines(b []byte) []string {
	var lines []string
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n') + 1
		if i == 0 {
			i = len(b)
		}
		lines = append(lines, string(b[:i]))
		b = b[i:]
	}
	return lines
}

// diffOp is one line of an edit script: kind ' ' (kept), '-' or '+';
// a and b count the old and new lines before it.
type diffOp struct {
	kind byte
	line string
	a, b int
}

// editScript is a shortest edit script from a to b (longest common
// subsequence; the common prefix and suffix are taken off first, so the
// quadratic table only covers the changed middle).
func editScript(a, b []string) []diffOp {
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	ma, mb := a[pre:len(a)-suf], b[pre:len(b)-suf]
	lcs := make([][]int, len(ma)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(mb)+1)
	}
	for i := len(ma) - 1; i >= 0; i-- {
		for j := len(mb) - 1; j >= 0; j-- {
			if ma[i] == mb[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var ops []diffOp
	i, j := 0, 0
	emit := func(kind byte, line string) {
		ops = append(ops, diffOp{kind, line, i, j})
		switch kind {
		case ' ':
			i, j = i+1, j+1
		case '-':
			i++
		case '+':
			j++
		}
	}
	for _, l := range a[:pre] {
		emit(' ', l)
	}
	for x, y := 0, 0; x < len(ma) || y < len(mb); {
		switch {
		case x < len(ma) && y < len(mb) && ma[x] == mb[y]:
			emit(' ', ma[x])
			x, y = x+1, y+1
		case x < len(ma) && (y == len(mb) || lcs[x+1][y] >= lcs[x][y+1]):
			emit('-', ma[x]) // removals first, as diff prints them
			x++
		default:
			emit('+', mb[y])
			y++
		}
	}
	for _, l := range a[len(a)-suf:] {
		emit(' ', l)
	}
	return ops
}

// unified renders the hunks of the edit script from a to b.
func unified(a, b []string) string {
	ops := editScript(a, b)
	var out strings.Builder
	for i := 0; i < len(ops); {
		for i < len(ops) && ops[i].kind == ' ' {
			i++
		}
		if i == len(ops) {
			break
		}
		start, end := max(0, i-diffContext), len(ops)
		for j := i; ; {
			for j < len(ops) && ops[j].kind != ' ' {
				j++
			}
			k := j
			for k < len(ops) && ops[k].kind == ' ' {
				k++
			}
			if k == len(ops) || k-j > 2*diffContext {
				end = min(len(ops), j+diffContext)
				break
			}
			j = k
		}
		hunk := ops[start:end]
		var na, nb int
		for _, op := range hunk {
			if op.kind != '+' {
				na++
			}
			if op.kind != '-' {
				nb++
			}
		}
		fmt.Fprintf(&out, "@@ -%s +%s @@\n", hunkRange(hunk[0].a, na), hunkRange(hunk[0].b, nb))
		for _, op := range hunk {
			out.WriteByte(op.kind)
			out.WriteString(op.line)
			if !strings.HasSuffix(op.line, "\n") {
				out.WriteString("\n\\ No newline at end of file\n")
			}
		}
		i = end
	}
	return out.String()
}

// hunkRange is diff -u's "start,count": a one-line range is just its
// line, an empty one names the line before it.
func hunkRange(before, n int) string {
	switch n {
	case 0:
		return fmt.Sprintf("%d,0", before)
	case 1:
		return fmt.Sprintf("%d", before+1)
	}
	return fmt.Sprintf("%d,%d", before+1, n)
}
