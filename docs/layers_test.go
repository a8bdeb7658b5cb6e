package docs

import (
	"bufio"
	"go/scanner"
	"go/token"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/vendors"
)

// module is the import path prefix of the project's packages.
const module = "github.com/wsl-gpu-hook/wsl-gpu-hook/"

// layers reads ARCHITECTURE.md's layer tables: each package it lists
// ("pkg/start/edits") under the bold heading of its layer ("Decisions").
func layers(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	layer := ""
	heading := regexp.MustCompile(`^\*\*([^*]+)\*\*`)
	row := regexp.MustCompile("^\\| `(pkg/[a-z0-9_/]+)` \\|")
	sc := bufio.NewScanner(strings.NewReader(read(t, "ARCHITECTURE.md")))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := heading.FindStringSubmatch(line); m != nil {
			layer = strings.TrimSuffix(m[1], ".")
		}
		if m := row.FindStringSubmatch(line); m != nil && layer != "" {
			out[m[1]] = layer
		}
	}
	return out
}

// imports lists each of the project's packages' imports (tests aside),
// by go list.
func imports(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./...")
	cmd.Dir = root
	data, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	out := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(line)
		out[strings.TrimPrefix(f[0], module)] = f[1:]
	}
	return out
}

// The layers ARCHITECTURE.md draws hold in the code: a decision does no
// I/O of its own (it imports none of the standard library's I/O packages
// and none of the project's I/O layers), and no package of a lower layer
// imports an entry or a command.
func TestDecisionsDoNoIO(t *testing.T) {
	layerOf := layers(t)
	imps := imports(t)
	io := map[string]bool{"os": true, "os/exec": true, "os/signal": true, "net": true, "net/http": true,
		"syscall": true, "golang.org/x/sys/unix": true, "io/ioutil": true}
	decisions := 0
	for pkg, layer := range layerOf {
		if _, ok := imps[pkg]; !ok {
			t.Errorf("ARCHITECTURE.md lists %s under %s, which go list does not know", pkg, layer)
			continue
		}
		for _, imp := range imps[pkg] {
			dep := strings.TrimPrefix(imp, module)
			switch {
			case layer == "Decisions" && io[imp]:
				t.Errorf("%s is a decision but imports %s: move the I/O to a probe or an applier beside it, or list it where it belongs in ARCHITECTURE.md", pkg, imp)
			case layer == "Decisions" && (layerOf[dep] == "I/O adapters" || layerOf[dep] == "Deciders that apply") && !typesOnly[dep]:
				t.Errorf("%s is a decision but imports %s (%s)", pkg, dep, layerOf[dep])
			case layer != "Entries" && (layerOf[dep] == "Entries" || strings.HasPrefix(dep, "cmd/")):
				t.Errorf("%s (%s) imports %s, which is above it", pkg, layer, dep)
			}
		}
		if layer == "Decisions" {
			decisions++
		}
	}
	if decisions < 10 {
		t.Errorf("found %d decisions in ARCHITECTURE.md: the layer tables moved, update layers()", decisions)
	}
}

// typesOnly are I/O adapters whose values decisions take (an adapter, a
// node, a probed host, a mount step): a decision may name their types, and calls none of
// their I/O (the reviewers' part; the test cannot tell the two apart).
var typesOnly = map[string]bool{
	"pkg/host/dxcore": true, "pkg/host/driverstore": true, "pkg/host/devnode": true, "pkg/start/ldcache": true,
	"pkg/host/probed": true, "pkg/start/oci": true, "pkg/start/mounts": true,
}

// No package but vendors spells a vendor id: a second table is how AMD's
// NPU came to be a GPU in one package and not in another. The test scans
// the non-test Go files of pkg/, cmd/ and config/ (tests and the simulator
// under test/ describe hosts, and may) for an integer literal equal to an
// id of the table, or a 0x spelling of one in a comment.
func TestNoVendorIDOutsideTheTable(t *testing.T) {
	ids := map[uint64]bool{}
	for _, id := range vendors.IDs() {
		ids[uint64(id.ID)] = true
	}
	table := filepath.Join(root, "pkg", "shared", "vendors") + string(filepath.Separator)
	goTokens(t, []string{"pkg", "cmd", "config"}, scanner.ScanComments, func(pos token.Position, tok token.Token, lit string) {
		if strings.HasPrefix(pos.Filename, table) || strings.Contains(pos.Filename, string(filepath.Separator)+"testdata"+string(filepath.Separator)) {
			return
		}
		var words []string
		switch tok {
		case token.INT:
			words = []string{strings.ReplaceAll(lit, "_", "")}
		case token.COMMENT:
			for _, w := range strings.FieldsFunc(lit, func(r rune) bool { return !strings.ContainsRune("0123456789abcdefABCDEFxX", r) }) {
				if strings.HasPrefix(strings.ToLower(w), "0x") {
					words = append(words, w)
				}
			}
		}
		for _, w := range words {
			if v, err := strconv.ParseUint(w, 0, 64); err == nil && ids[v] {
				t.Errorf("%s: %s: a vendor id outside package vendors: add what it decides to the vendor table (pkg/shared/vendors) and ask it there", pos, w)
			}
		}
	})
}
