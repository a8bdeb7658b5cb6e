package docs

import (
	"bufio"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// module is the import path prefix of the project's packages.
const module = "github.com/wsl-gpu-hook/wsl-gpu-hook/"

// layers reads ARCHITECTURE.md's layer tables: each package it lists
// ("pkg/edits") under the bold heading of its layer ("Decisions").
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
	"pkg/dxcore": true, "pkg/driverstore": true, "pkg/devnode": true, "pkg/ldcache": true,
	"pkg/probed": true, "pkg/oci": true, "pkg/mounts": true,
}
