package docs

import (
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// readmeMaxLines is the front door's size: what it is, the commands,
// install, asking for GPUs and where the rest is.
const readmeMaxLines = 250

// root is the repository, seen from this package's directory.
const root = ".."

// pages are the documents the checks read, relative to root.
func pages(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := []string{"README.md", "ARCHITECTURE.md"}
	for _, d := range docs {
		out = append(out, filepath.Join("docs", filepath.Base(d)))
	}
	return out
}

func read(t *testing.T, rel string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// line is one line of a page outside code blocks, or a fence.
type line struct {
	n     int    // 1-based
	text  string // the line
	fence string // a fence's info string ("sh", "" for a bare fence); only when isFence
	// isFence marks a line that opens a code block.
	isFence bool
	inCode  bool // inside a code block (fences included)
}

// lines splits a page, telling prose from code blocks.
func lines(page string) []line {
	var out []line
	open := ""
	for i, l := range strings.Split(page, "\n") {
		trimmed := strings.TrimLeft(l, " ")
		switch {
		case open == "" && (strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~")):
			open = trimmed[:3]
			out = append(out, line{n: i + 1, text: l, fence: strings.TrimSpace(trimmed[3:]), isFence: true, inCode: true})
		case open != "" && strings.HasPrefix(trimmed, open):
			open = ""
			out = append(out, line{n: i + 1, text: l, inCode: true})
		default:
			out = append(out, line{n: i + 1, text: l, inCode: open != ""})
		}
	}
	return out
}

func TestREADMELength(t *testing.T) {
	if n := strings.Count(read(t, "README.md"), "\n"); n > readmeMaxLines {
		t.Errorf("README.md has %d lines, more than %d: it is the front door; move details to a page under docs/", n, readmeMaxLines)
	}
}

// The README links every page, so none is only reachable by chance.
func TestREADMELinksEveryPage(t *testing.T) {
	readme := read(t, "README.md")
	for _, p := range pages(t)[1:] {
		if !strings.Contains(readme, "]("+filepath.ToSlash(p)) {
			t.Errorf("README.md does not link %s: add it to the documentation table", p)
		}
	}
}

// anchors are the #fragments GitHub makes of a page's headings: lower
// case, spaces to '-', every character but letters, digits, '-' and '_'
// dropped, and "-1", "-2" after a repeated one.
func anchors(page string) map[string]bool {
	out := map[string]bool{}
	for _, l := range lines(page) {
		if l.inCode {
			continue
		}
		level := len(l.text) - len(strings.TrimLeft(l.text, "#"))
		if level == 0 || level > 6 || !strings.HasPrefix(l.text[level:], " ") {
			continue
		}
		s := slug(strings.TrimSpace(l.text[level:]))
		a := s
		for i := 1; out[a]; i++ {
			a = s + "-" + strconv.Itoa(i)
		}
		out[a] = true
	}
	return out
}

// slug is the fragment GitHub gives a heading.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestAnchor(t *testing.T) {
	for _, tt := range []struct{ heading, want string }{
		{"Asking for GPUs", "asking-for-gpus"},
		{"Podman Desktop on Windows (`podman machine`)", "podman-desktop-on-windows-podman-machine"},
		{"runc / crun directly", "runc--crun-directly"},
		{"AMD ROCm (7.1 and later)", "amd-rocm-71-and-later"},
		{"Fallbacks: firstAvailable", "fallbacks-firstavailable"},
		{"How this differs from wslc's wsl-gpu-hook", "how-this-differs-from-wslcs-wsl-gpu-hook"},
	} {
		t.Run(tt.heading, func(t *testing.T) {
			if got := slug(tt.heading); got != tt.want {
				t.Errorf("slug(%q) = %q, want %q", tt.heading, got, tt.want)
			}
		})
	}
}

// link is [text](target) in prose; inline code is skipped first.
var (
	linkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	codeRE = regexp.MustCompile("`[^`]*`")
)

// Every relative link names a file or directory that exists, and every
// #anchor a heading of the page it points into.
func TestLinks(t *testing.T) {
	for _, p := range pages(t) {
		t.Run(p, func(t *testing.T) {
			for _, l := range lines(read(t, p)) {
				if l.inCode {
					continue
				}
				for _, m := range linkRE.FindAllStringSubmatch(codeRE.ReplaceAllString(l.text, ""), -1) {
					if err := checkLink(p, m[1]); err != "" {
						t.Errorf("%s:%d: link %s: %s", p, l.n, m[1], err)
					}
				}
			}
		})
	}
}

// checkLink says what is wrong with target, linked from page, or "".
func checkLink(page, target string) string {
	if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
		return ""
	}
	path, frag, _ := strings.Cut(target, "#")
	file := page
	if path != "" {
		file = filepath.Join(filepath.Dir(page), filepath.FromSlash(path))
	}
	st, err := os.Stat(filepath.Join(root, file))
	if err != nil {
		return "no such file " + filepath.ToSlash(file)
	}
	if frag == "" {
		return ""
	}
	if st.IsDir() || !strings.HasSuffix(file, ".md") {
		return "an anchor into something that is not a Markdown page"
	}
	data, err := os.ReadFile(filepath.Join(root, file))
	if err != nil {
		return err.Error()
	}
	if !anchors(string(data))[frag] {
		return "no heading in " + filepath.ToSlash(file) + " makes the anchor #" + frag
	}
	return ""
}

var (
	runByRE = regexp.MustCompile(`^<!-- run by (\S+) (Test\w+)(/\S+)? -->$`)
	notRun  = regexp.MustCompile(`^<!-- not run: \S.* -->$`)
)

// Every shell block is run by a test, which names it in a comment before
// the block, or says why it is not.
func TestShellBlocks(t *testing.T) {
	shells := []string{"sh", "bash", "console", "shell"}
	for _, p := range pages(t) {
		t.Run(p, func(t *testing.T) {
			ls := lines(read(t, p))
			for i, l := range ls {
				if !l.isFence || !slices.Contains(shells, l.fence) {
					continue
				}
				marker := ""
				for j := i - 1; j >= 0; j-- {
					if s := strings.TrimSpace(ls[j].text); s != "" {
						marker = s
						break
					}
				}
				switch m := runByRE.FindStringSubmatch(marker); {
				case m != nil:
					if err := testExists(m[1], m[2], strings.TrimPrefix(m[3], "/")); err != "" {
						t.Errorf("%s:%d: %s: %s", p, l.n, marker, err)
					}
				case notRun.MatchString(marker):
				default:
					t.Errorf("%s:%d: a ```%s block with neither <!-- run by DIR TestName/subtest --> nor <!-- not run: reason --> right before it", p, l.n, l.fence)
				}
			}
		})
	}
}

// testExists says what is missing of the test fn (and its subtest sub)
// in the Go files of dir, or "".
func testExists(dir, fn, sub string) string {
	files, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(dir), "*_test.go"))
	if err != nil || len(files) == 0 {
		return "no test files in " + dir
	}
	var all strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return err.Error()
		}
		all.Write(data)
	}
	src := all.String()
	if !strings.Contains(src, "func "+fn+"(") {
		return "no func " + fn + " in " + dir
	}
	if sub != "" && !strings.Contains(src, strconv.Quote(sub)) {
		return "no subtest " + strconv.Quote(sub) + " in " + dir
	}
	return ""
}

// Every message troubleshooting.md quotes (a line "> `...`") is still a
// part of a string in the Go source of the binaries (cmd, pkg, config; no
// test files), so an entry cannot outlive its message.
func TestTroubleshootingMessages(t *testing.T) {
	strs := goStrings(t, "cmd", "pkg", "config")
	quoteRE := regexp.MustCompile("^> `([^`]+)`$")
	n := 0
	for _, l := range lines(read(t, "docs/troubleshooting.md")) {
		m := quoteRE.FindStringSubmatch(l.text)
		if l.inCode || m == nil {
			continue
		}
		n++
		if !slices.ContainsFunc(strs, func(s string) bool { return strings.Contains(s, m[1]) }) {
			t.Errorf("docs/troubleshooting.md:%d: no string in the code holds %q: the message changed; change the entry with it", l.n, m[1])
		}
	}
	if n < 20 {
		t.Errorf("docs/troubleshooting.md quotes %d messages: the check reads lines of the form > `message`", n)
	}
}

// goStrings returns every string literal, unquoted, of the non-test Go
// files under dirs.
func goStrings(t *testing.T, dirs ...string) []string {
	t.Helper()
	var out []string
	goTokens(t, dirs, 0, func(_ token.Position, tok token.Token, lit string) {
		if tok == token.STRING {
			if u, err := strconv.Unquote(lit); err == nil {
				out = append(out, u)
			}
		}
	})
	return out
}

// goTokens calls f with every token of the non-test Go files under dirs
// (relative to the module's root), scanned with mode (scanner.ScanComments
// for the comments too), and its position.
func goTokens(t *testing.T, dirs []string, mode scanner.Mode, f func(token.Position, token.Token, string)) {
	t.Helper()
	for _, d := range dirs {
		err := filepath.WalkDir(filepath.Join(root, d), func(path string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			fset := token.NewFileSet()
			var s scanner.Scanner
			s.Init(fset.AddFile(path, -1, len(src)), src, nil, mode)
			for {
				pos, tok, lit := s.Scan()
				if tok == token.EOF {
					break
				}
				f(fset.Position(pos), tok, lit)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// ARCHITECTURE.md names every package under pkg/, and none that is gone.
func TestArchitectureNamesEveryPackage(t *testing.T) {
	named := map[string]bool{}
	for _, m := range regexp.MustCompile(`\bpkg/[a-z0-9_]+(/[a-z0-9_]+)*`).FindAllString(read(t, "ARCHITECTURE.md"), -1) {
		named[m] = true
	}
	have := map[string]bool{}
	err := filepath.WalkDir(filepath.Join(root, "pkg"), func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		have[filepath.ToSlash(rel)] = true
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for p := range have {
		if !named[p] {
			t.Errorf("ARCHITECTURE.md does not name %s: say which layer it is in and what it does", p)
		}
	}
	groups := folders(t)
	for p := range named {
		if _, folder := groups[p]; !have[p] && !folder {
			t.Errorf("ARCHITECTURE.md names %s, which is not a package", p)
		}
	}
}

// folders reads ARCHITECTURE.md's folder table: each folder ("pkg/start")
// and the packages it lists. Its keys are the folders, without the slash.
func folders(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	row := regexp.MustCompile("^\\| `(pkg/[a-z]+)/` \\| [^|]+ \\| ([a-z, ]+) \\|$")
	for _, line := range strings.Split(read(t, "ARCHITECTURE.md"), "\n") {
		if m := row.FindStringSubmatch(line); m != nil {
			out[m[1]] = strings.Split(m[2], ", ")
		}
	}
	if len(out) == 0 {
		t.Fatal("ARCHITECTURE.md has no folder table: update folders()")
	}
	return out
}

// The folders are the map ARCHITECTURE.md draws: every package sits in the
// folder the table gives it (its subpackages with it), and a folder holds
// packages only, so a newcomer's first look at pkg/ shows the parts.
func TestFoldersAreTheMap(t *testing.T) {
	want := map[string]string{} // package -> folder
	for folder, pkgs := range folders(t) {
		for _, p := range pkgs {
			if other, ok := want[p]; ok {
				t.Errorf("ARCHITECTURE.md puts %s in both %s and %s", p, other, folder)
			}
			want[p] = folder
		}
	}
	seen, checked := map[string]bool{}, map[string]bool{}
	err := filepath.WalkDir(filepath.Join(root, "pkg"), func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		rel, err := filepath.Rel(filepath.Join(root, "pkg"), filepath.Dir(path))
		parts := strings.Split(filepath.ToSlash(rel), "/")
		if len(parts) < 2 {
			t.Errorf("%s sits in pkg/%s, which is a folder of packages: move it into a package of its own", filepath.Base(path), rel)
			return err
		}
		folder, pkg := "pkg/"+parts[0], parts[1]
		if checked[folder+"/"+pkg] {
			return err
		}
		checked[folder+"/"+pkg], seen[pkg] = true, true
		switch got, ok := want[pkg]; {
		case !ok:
			t.Errorf("%s/%s is not in ARCHITECTURE.md's folder table: add it to the row of the part it serves", folder, pkg)
		case got != folder:
			t.Errorf("%s/%s sits in %s, and ARCHITECTURE.md says %s: move it, or the table", folder, pkg, folder, got)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for p, folder := range want {
		if !seen[p] {
			t.Errorf("ARCHITECTURE.md lists %s in %s, where there is no such package", p, folder)
		}
	}
}
