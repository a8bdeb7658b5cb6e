package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/config"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/cli"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/wsl"
)

// command is one of wsl-gpu-ctl's commands: what its help says, its flags
// and what runs it. The top-level help, each command's help, the man page
// and the completion scripts are all this table (commands_test.go holds
// the last two to it).
type command struct {
	name string
	// args is its usage line after the flags' synopsis ("ENGINE...").
	args    string
	summary string
	// words are the arguments it takes by name (install's engines), each
	// with what it means.
	words []word
	// sub are its verbs (cdi generate): a command with verbs runs one.
	sub []command
	// noConfig runs it without reading the configuration.
	noConfig bool
	// define defines its flags on fs and returns what runs it once they
	// are parsed; nil for a command with verbs.
	define func(fs *flag.FlagSet) runFunc
}

type word struct{ name, means string }

// runFunc runs a command; args are the arguments left after its flags,
// only for a command with words.
type runFunc func(ctx context.Context, e env, args []string) error

// env is what every command may use.
type env struct {
	cfg            config.Config
	stdout, stderr io.Writer
}

// commands is wsl-gpu-ctl's command table, in the help's order.
func commands() []command {
	return []command{
		infoCommand(),
		doctorCommand(),
		{name: "cdi", summary: "Write the CDI specs for this host's adapters.", sub: []command{cdiGenerateCommand(), cdiKeepCommand()}},
		installCommand(false),
		installCommand(true),
		topCommand(),
		metricsCommand(),
		{name: "version", summary: "Print the version.", noConfig: true, define: func(*flag.FlagSet) runFunc {
			return func(_ context.Context, e env, _ []string) error {
				_, err := fmt.Fprintf(e.stdout, "%s %s\n", wsl.CtlName, version)
				return err
			}
		}},
	}
}

// find resolves the command line's words to a command with its path
// ("cdi generate") and the arguments after them.
func find(cmds []command, name string, args []string) (command, string, []string, error) {
	for _, c := range cmds {
		if c.name != name {
			continue
		}
		if len(c.sub) == 0 {
			return c, name, args, nil
		}
		if len(args) == 0 || strings.HasPrefix(args[0], "-") && !cli.IsHelpArg(args[0]) {
			return command{}, "", nil, cli.CmdUsagef(name, "name a verb: %s", verbs(c.sub))
		}
		if cli.IsHelpArg(args[0]) {
			return c, name, args, nil
		}
		sub, path, rest, err := find(c.sub, args[0], args[1:])
		if err != nil {
			return command{}, "", nil, cli.CmdUsagef(name, "unknown verb %q: want %s", args[0], verbs(c.sub))
		}
		return sub, name + " " + path, rest, nil
	}
	return command{}, "", nil, cli.Usagef("unknown command %q", name)
}

func verbs(cmds []command) string {
	var names []string
	for _, c := range cmds {
		names = append(names, c.name)
	}
	return strings.Join(names, ", ")
}

// doc is c's help, for the path that ran it.
func (c command) doc(progName, path string, fs *flag.FlagSet) cli.Doc {
	d := cli.Doc{Prog: progName, Cmd: path, Summary: c.summary}
	var more strings.Builder
	if len(c.sub) > 0 {
		d.Args = "VERB ..."
		more.WriteString("verbs:\n")
		for _, s := range c.sub {
			fmt.Fprintf(&more, "  %-12s %s\n", s.name, firstLine(s.summary))
		}
	} else {
		d.Args = strings.TrimSpace(synopsis(fs) + " " + c.args)
	}
	if len(c.words) > 0 {
		fmt.Fprintf(&more, "%ss:\n", strings.ToLower(strings.TrimSuffix(c.args, "...")))
		for _, w := range c.words {
			fmt.Fprintf(&more, "  %-12s %s\n", w.name, w.means)
		}
	}
	d.More = more.String()
	return d
}

// synopsis is the usage line's part for fs's flags: "[--json] [--root DIR]".
func synopsis(fs *flag.FlagSet) string {
	var parts []string
	fs.VisitAll(func(f *flag.Flag) {
		name, _ := flag.UnquoteUsage(f)
		if isBool(f) {
			parts = append(parts, "[--"+f.Name+"]")
		} else {
			parts = append(parts, "[--"+f.Name+" "+strings.ToUpper(name)+"]")
		}
	})
	return strings.Join(parts, " ")
}

func isBool(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// topDoc is wsl-gpu-ctl's own help.
func topDoc(progName string, cmds []command) cli.Doc {
	var b strings.Builder
	b.WriteString("commands:\n")
	for _, c := range cmds {
		if len(c.sub) > 0 {
			for _, s := range c.sub {
				fmt.Fprintf(&b, "  %-14s %s\n", c.name+" "+s.name, firstLine(s.summary))
			}
			continue
		}
		fmt.Fprintf(&b, "  %-14s %s\n", c.name, firstLine(c.summary))
	}
	fmt.Fprintf(&b, "  %-14s %s\n", "help [COMMAND]", "Print this help, or a command's (as COMMAND --help does).")
	fmt.Fprintf(&b, "\n--config FILE is the configuration (default $%s,\nelse %s).\n", config.Env, config.DefaultPath)
	fmt.Fprintf(&b, "%s runs each of these too, by running %s.\n", wsl.HookName, wsl.CtlName)
	return cli.Doc{
		Prog:    progName,
		Args:    "[--config FILE] COMMAND [ARGS...]",
		Summary: "The commands people run for wsl-gpu-hook: list the GPU adapters, check the host\nand engines, write the CDI specs, install the hook into engines, watch the GPUs.",
		More:    b.String(),
	}
}
