package main

import (
	"flag"
	"maps"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The man page and the completion scripts are written by hand; these
// tests hold them to the command table, so that a command, verb, engine or
// flag added to (or dropped from) the binary fails here until they say so.

// leaf is a command that runs: its path as typed and its flags, each
// with whether it takes a value.
type leaf struct {
	path  string
	flags map[string]bool
}

func leaves(t *testing.T) []leaf {
	t.Helper()
	var out []leaf
	var add func(prefix string, cmds []command)
	add = func(prefix string, cmds []command) {
		for _, c := range cmds {
			if len(c.sub) > 0 {
				add(prefix+c.name+" ", c.sub)
				continue
			}
			fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
			c.define(fs)
			l := leaf{path: prefix + c.name, flags: map[string]bool{}}
			fs.VisitAll(func(f *flag.Flag) { l.flags[f.Name] = !isBool(f) })
			out = append(out, l)
		}
	}
	add("", commands())
	return out
}

// topNames are the words a completion offers first: the table's commands
// and help (cli.Parse's).
func topNames() []string {
	var names []string
	for _, c := range commands() {
		names = append(names, c.name)
	}
	return append(names, "help")
}

func wordsOf(name string) (words, verbs []string) {
	for _, c := range commands() {
		if c.name != name {
			continue
		}
		for _, w := range c.words {
			words = append(words, w.name)
		}
		for _, s := range c.sub {
			verbs = append(verbs, s.name)
		}
	}
	return words, verbs
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile("../../packaging/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestManPage: packaging/wsl-gpu-ctl.1 has one .SS per command, in the
// table's order, and under it one .TP item per flag: .B for a switch, .BI
// with its argument for a flag that takes a value.
func TestManPage(t *testing.T) {
	page := readFile(t, "wsl-gpu-ctl.1")
	_, commandsSection, ok := strings.Cut(page, "\n.SH COMMANDS\n")
	if !ok {
		t.Fatal("no COMMANDS section")
	}
	commandsSection, _, _ = strings.Cut(commandsSection, "\n.SH ")
	var sections []string
	flags := map[string]map[string]bool{}
	item := regexp.MustCompile(`^\.(BI?) \\-\\-([a-z0-9\\-]+)`)
	var afterTP bool
	for _, line := range strings.Split(commandsSection, "\n") {
		if name, ok := strings.CutPrefix(line, ".SS "); ok {
			name = strings.Trim(name, `"`)
			sections = append(sections, name)
			flags[name] = map[string]bool{}
			continue
		}
		if m := item.FindStringSubmatch(line); afterTP && m != nil && len(sections) > 0 {
			flags[sections[len(sections)-1]][strings.ReplaceAll(m[2], `\-`, "-")] = m[1] == "BI"
		}
		afterTP = line == ".TP"
	}
	var paths []string
	for _, l := range leaves(t) {
		paths = append(paths, l.path)
		if !maps.Equal(flags[l.path], l.flags) {
			t.Errorf("man page: %s's flags (name: takes a value) %v, the binary's %v", l.path, flags[l.path], l.flags)
		}
	}
	if !slices.Equal(sections, paths) {
		t.Errorf("man page: commands %q, the binary's %q", sections, paths)
	}
}

// TestBashCompletion runs packaging/completions/wsl-gpu-ctl.bash as bash
// does at a Tab and checks what it offers: the commands, each command's
// verbs or engines, its flags and --help after a dash; after a flag that
// takes a value none of those, after a switch the same as without it.
func TestBashCompletion(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	complete := func(words ...string) []string {
		t.Helper()
		script := `source packaging/completions/wsl-gpu-ctl.bash
COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=(); _wsl_gpu_ctl
printf '%s\n' "${COMPREPLY[@]}"`
		cmd := exec.Command("bash", append([]string{"-c", script, "bash", "wsl-gpu-ctl"}, words...)...)
		cmd.Dir = "../.."
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("complete %q: %v", words, err)
		}
		got := strings.Fields(string(out))
		slices.Sort(got)
		return got
	}
	sorted := func(s ...string) []string {
		s = slices.Clone(s)
		slices.Sort(s)
		return s
	}
	if got, want := complete(""), sorted(topNames()...); !slices.Equal(got, want) {
		t.Errorf("wsl-gpu-ctl <Tab>: %q, want %q", got, want)
	}
	if got, want := complete("help", ""), sorted(topNames()[:len(topNames())-1]...); !slices.Equal(got, want) {
		t.Errorf("wsl-gpu-ctl help <Tab>: %q, want %q", got, want)
	}
	for _, c := range commands() {
		if _, verbs := wordsOf(c.name); len(verbs) > 0 {
			if got := complete(c.name, ""); !slices.Equal(got, sorted(verbs...)) {
				t.Errorf("wsl-gpu-ctl %s <Tab>: %q, want %q", c.name, got, sorted(verbs...))
			}
		}
	}
	for _, l := range leaves(t) {
		words := strings.Fields(l.path)
		want := []string{"--help"}
		for f := range l.flags {
			want = append(want, "--"+f)
		}
		if got := complete(append(words, "-")...); !slices.Equal(got, sorted(want...)) {
			t.Errorf("wsl-gpu-ctl %s -<Tab>: %q, want %q", l.path, got, sorted(want...))
		}
		plain := complete(append(words, "")...)
		if engines, _ := wordsOf(l.path); len(engines) > 0 && !slices.Equal(plain, sorted(engines...)) {
			t.Errorf("wsl-gpu-ctl %s <Tab>: %q, want %q", l.path, plain, sorted(engines...))
		}
		for f, takesValue := range l.flags {
			got := complete(append(words, "--"+f, "")...)
			switch {
			case takesValue && (slices.Contains(got, "--help") || len(got) > 0 && slices.Equal(got, plain)):
				t.Errorf("wsl-gpu-ctl %s --%s <Tab>: %q: offers the command's words, not a value", l.path, f, got)
			case !takesValue && !slices.Equal(got, plain):
				t.Errorf("wsl-gpu-ctl %s --%s <Tab>: %q, want %q as without the switch", l.path, f, got, plain)
			}
		}
	}
}

// TestZshCompletion reads packaging/completions/_wsl-gpu-ctl: its
// commands, verbs and engines arrays, and per case arm of the commands the
// flags it specifies ('--name=[...]' for a flag that takes a value,
// '--name[...]' for a switch), and checks its syntax with zsh -n when zsh
// is installed.
func TestZshCompletion(t *testing.T) {
	script := readFile(t, "completions/_wsl-gpu-ctl")
	if _, err := exec.LookPath("zsh"); err == nil {
		if out, err := exec.Command("zsh", "-n", "../../packaging/completions/_wsl-gpu-ctl").CombinedOutput(); err != nil {
			t.Errorf("zsh -n: %v: %s", err, out)
		}
	}
	array := func(name string) []string {
		_, body, ok := strings.Cut(script, "local -a "+name+"=(\n")
		if !ok {
			t.Fatalf("no array %s", name)
		}
		body, _, _ = strings.Cut(body, "\n\t)")
		var out []string
		for _, line := range strings.Split(body, "\n") {
			name, _, _ := strings.Cut(strings.TrimLeft(strings.TrimSpace(line), "'"), ":")
			out = append(out, name)
		}
		return out
	}
	if got := array("commands"); !slices.Equal(got, topNames()) {
		t.Errorf("zsh commands %q, the binary's %q", got, topNames())
	}
	engines, _ := wordsOf("install")
	if got := array("engines"); !slices.Equal(got, engines) {
		t.Errorf("zsh engines %q, the binary's %q", got, engines)
	}
	if _, verbs := wordsOf("cdi"); !slices.Equal(array("verbs"), verbs) {
		t.Errorf("zsh verbs %q, the binary's %q", array("verbs"), verbs)
	}
	_, arms, ok := strings.Cut(script, "case $line[1] in\n")
	if !ok {
		t.Fatal("no case on the command")
	}
	armStart := regexp.MustCompile(`(?m)^\t\t([a-z|]+)\)$`)
	spec := regexp.MustCompile(`'(?:\([^)]*\))?\*?--([a-z0-9-]+)(=?)\[`)
	got := map[string]map[string]bool{}
	var armNames []string
	idx := armStart.FindAllStringSubmatchIndex(arms, -1)
	for i, m := range idx {
		end := len(arms)
		if i+1 < len(idx) {
			end = idx[i+1][0]
		}
		flags := map[string]bool{}
		for _, f := range spec.FindAllStringSubmatch(arms[m[1]:end], -1) {
			if f[1] != "help" {
				flags[f[1]] = f[2] == "="
			}
		}
		for _, name := range strings.Split(arms[m[2]:m[3]], "|") {
			armNames = append(armNames, name)
			got[name] = flags
		}
	}
	if !slices.Equal(armNames, topNames()) {
		t.Errorf("zsh case arms %q, the binary's commands %q", armNames, topNames())
	}
	want := map[string]map[string]bool{}
	for _, l := range leaves(t) {
		top, _, _ := strings.Cut(l.path, " ")
		if want[top] == nil {
			want[top] = map[string]bool{}
		}
		maps.Copy(want[top], l.flags)
	}
	for top, flags := range want {
		if !maps.Equal(got[top], flags) {
			t.Errorf("zsh %s: flags (name: takes a value) %v, the binary's %v", top, got[top], flags)
		}
	}
}
