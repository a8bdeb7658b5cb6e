package doctor

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"tags.cncf.io/container-device-interface/pkg/cdi"
	specs "tags.cncf.io/container-device-interface/specs-go"
)

// cdiFacts is what the engine checks need to know about the CDI specs.
type cdiFacts struct {
	// usable holds the qualified device names engines can inject: loaded,
	// not in conflict, from a spec that is not stale.
	usable map[string]bool
	// ours are our specs, loaded, stale or not, in path order.
	ours []specOfOurs
}

// specOfOurs is one of our specs: its path as users know it, its kind and
// the hooks of ours it names.
type specOfOurs struct {
	path, kind string
	hooks      []string
}

func (c cdiFacts) hasKind(kind string) bool {
	for name := range c.usable {
		if strings.HasPrefix(name, kind+"=") {
			return true
		}
	}
	return false
}

// Our spec's file name and the vendors the hook's spec uses.
const ourSpecBase = "wsl-gpu-hook"

// checkCDI loads every spec the way engines do (the CDI module's cache:
// later dirs override earlier ones, two specs defining one device in the
// same dir are a conflict and the device is dropped) and then checks what
// each spec names on the host.
func checkCDI(o Options, r *Report) cdiFacts {
	facts := cdiFacts{usable: map[string]bool{}}
	var dirs []string
	for _, d := range o.CDIDirs {
		dirs = append(dirs, o.resolved(d))
	}
	cache, err := cdi.NewCache(cdi.WithSpecDirs(dirs...), cdi.WithAutoRefresh(false))
	if cache == nil {
		r.add("cdi", Fail, "", "load CDI specs: %v", err)
		return facts
	}
	var all []*cdi.Spec
	for _, v := range cache.ListVendors() {
		all = append(all, cache.GetVendorSpecs(v)...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].GetPath() < all[j].GetPath() })
	errs := cache.GetErrors()

	if len(all) == 0 && len(errs) == 0 {
		r.add("cdi", OK, "", "no CDI spec in %s: engines can only reach the GPU through the hook (CDI is optional)", strings.Join(o.CDIDirs, ", "))
		return facts
	}
	// Specs that failed to load are not in the cache at all.
	var broken []string
	for p := range errs {
		if !slices.ContainsFunc(all, func(s *cdi.Spec) bool { return s.GetPath() == p }) {
			broken = append(broken, p)
		}
	}
	sort.Strings(broken)
	for _, p := range broken {
		r.add("cdi "+o.unroot(p), Fail, "fix or remove "+o.unroot(p), "engines skip this spec: %v", errors.Join(errs[p]...))
	}
	for _, s := range all {
		checkSpec(o, r, s, cache, errs[s.GetPath()], &facts)
	}
	return facts
}

// unroot turns a path under Root back into the system path users know.
func (o Options) unroot(p string) string {
	if o.Root == "" {
		return p
	}
	if rel, err := filepath.Rel(o.Root, p); err == nil && !strings.HasPrefix(rel, "..") {
		return "/" + rel
	}
	return p
}

func checkSpec(o Options, r *Report, s *cdi.Spec, cache *cdi.Cache, specErrs []error, facts *cdiFacts) {
	path := o.unroot(s.GetPath())
	check := "cdi " + path
	kind := s.Kind
	ours := isOurs(s)
	if ours {
		facts.ours = append(facts.ours, specOfOurs{path: path, kind: kind, hooks: ourHooks(s.Spec)})
	}

	missing := stalePaths(o, s.Spec)
	var names []string
	for _, d := range s.Devices {
		names = append(names, kind+"="+d.Name)
	}
	if len(missing) > 0 {
		r.add(check, Fail, staleFix(o, path, kind, ours), "%s is stale: %s no longer exist%s on the host%s", kind,
			strings.Join(firstN(missing, 3), ", "), plural(len(missing)), staleWhy(o, kind, missing))
		return
	}
	if len(specErrs) > 0 {
		r.add(check, Fail, "remove one of the conflicting specs, or give their devices different names", "%s: engines refuse these devices: %v", kind, errors.Join(specErrs...))
		return
	}
	// A device a higher-priority dir also defines is silently replaced.
	var shadowed []string
	for _, n := range names {
		d := cache.GetDevice(n)
		if d == nil {
			continue
		}
		if d.GetSpec().GetPath() != s.GetPath() {
			shadowed = append(shadowed, fmt.Sprintf("%s (by %s)", n, o.unroot(d.GetSpec().GetPath())))
			continue
		}
		facts.usable[n] = true
	}
	if len(shadowed) > 0 {
		r.add(check, Warn, "remove the spec you do not want engines to use", "engines use another spec for %s", strings.Join(shadowed, ", "))
		return
	}
	who := ""
	if ours {
		who = " (ours)"
	}
	r.add(check, OK, "", "%s%s: %s; every path it names exists", kind, who, strings.Join(firstN(names, 6), ", "))
}

// ourHooks lists the hooks of ours a spec names, each once.
func ourHooks(s *specs.Spec) []string {
	var out []string
	for _, e := range specEdits(s) {
		for _, h := range e.Hooks {
			if h != nil && filepath.Base(h.Path) == ourSpecBase && !slices.Contains(out, h.Path) {
				out = append(out, h.Path)
			}
		}
	}
	return out
}

// isOurs tells our spec by its file name or by a hook that is ours.
func isOurs(s *cdi.Spec) bool {
	return strings.HasPrefix(filepath.Base(s.GetPath()), ourSpecBase) || len(ourHooks(s.Spec)) > 0
}

func specEdits(s *specs.Spec) []specs.ContainerEdits {
	edits := []specs.ContainerEdits{s.ContainerEdits}
	for _, d := range s.Devices {
		edits = append(edits, d.ContainerEdits)
	}
	return edits
}

// stalePaths lists the host paths the spec binds, creates device nodes
// from or runs as hooks that do not exist (each once, in spec order).
func stalePaths(o Options, s *specs.Spec) []string {
	var missing []string
	seen := map[string]bool{}
	note := func(p string) {
		if p == "" || seen[p] || !filepath.IsAbs(p) {
			return
		}
		seen[p] = true
		if _, err := os.Stat(filepath.Join(o.HostRoot, p)); errors.Is(err, fs.ErrNotExist) {
			missing = append(missing, p)
		}
	}
	for _, e := range specEdits(s) {
		for _, n := range e.DeviceNodes {
			if n == nil {
				continue
			}
			if n.HostPath != "" {
				note(n.HostPath)
			} else {
				note(n.Path)
			}
		}
		for _, m := range e.Mounts {
			if m != nil && isBind(m) {
				note(m.HostPath)
			}
		}
		for _, h := range e.Hooks {
			if h != nil {
				note(h.Path)
			}
		}
	}
	return missing
}

// isBind reports whether a mount's hostPath is a host path: CDI mounts are
// binds unless a type such as tmpfs says otherwise.
func isBind(m *specs.Mount) bool {
	if m.Type == "" || m.Type == "bind" || m.Type == "none" {
		return true
	}
	return slices.Contains(m.Options, "bind") || slices.Contains(m.Options, "rbind")
}

// staleWhy explains a stale spec the way users meet it.
func staleWhy(o Options, kind string, missing []string) string {
	inStore := slices.ContainsFunc(missing, func(p string) bool {
		return strings.HasPrefix(p, o.DriversDir+"/")
	})
	var why string
	if inStore {
		why = ": the spec names a driver store folder by its hash, and a Windows driver update replaced that folder"
	}
	if strings.HasPrefix(kind, "nvidia.com/") {
		why += `; containers given these devices fail to start or print "Failed to initialize NVML: N/A"`
	}
	return why
}

func staleFix(o Options, path, kind string, ours bool) string {
	switch {
	case ours && inRancherDistro(o):
		return rancherRun // install cdi's unit is systemd's; the script writes the specs there
	case ours:
		return "sudo wsl-gpu-hook install cdi (regenerates " + path + " and the unit that refreshes it at boot)"
	case strings.HasPrefix(kind, "nvidia.com/"):
		return "sudo nvidia-ctk cdi generate --output=" + shellArg(path) + ", or use ours, which follows driver updates: sudo rm " + shellArg(path) + " && sudo wsl-gpu-hook install cdi"
	}
	return "regenerate " + path + " with the tool that wrote it, or remove it"
}

func firstN(s []string, n int) []string {
	if len(s) <= n {
		return s
	}
	return append(slices.Clip(s[:n]), fmt.Sprintf("and %d more", len(s)-n))
}

func plural(n int) string {
	if n == 1 {
		return "s"
	}
	return ""
}
