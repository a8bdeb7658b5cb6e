package e2e

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/testbin"
)

// Cached images are tarballs: extracting one per container is much cheaper
// than building it, and each container gets a root it may change. The
// version in the name changes whenever the recipe does.
const (
	debianTarball  = "debian-bookworm-minbase-v1.tar"
	busyboxTarball = "busybox-static-v1.tar"
)

// debianImage returns the cached Debian bookworm minbase tarball, running
// debootstrap first if there is none. The host is Debian 12, so probes
// built with the host's gcc run in it.
func debianImage(cache string) (string, error) {
	out := filepath.Join(cache, debianTarball)
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	if _, err := exec.LookPath("debootstrap"); err != nil {
		return "", errors.New("debootstrap is not installed: apt-get install debootstrap")
	}
	mirror, err := aptMirror("/etc/apt", "bookworm")
	if err != nil {
		return "", err
	}
	work, err := os.MkdirTemp(cache, "debian-build-")
	if err != nil {
		return "", fmt.Errorf("create build dir: %w", err)
	}
	defer os.RemoveAll(work)
	root := filepath.Join(work, "root")
	// In a private mount namespace: debootstrap mounts /proc in root while
	// it runs, which the tests' checks of the host's mount table would see.
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "debootstrap", "--variant=minbase", "bookworm", root, mirror)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("debootstrap bookworm from %s: %w\n%s", mirror, err, tail(msg, 20))
	}
	// What a slim image drops; it halves what every test extracts.
	for _, dir := range []string{"var/cache/apt", "var/lib/apt/lists", "usr/share/doc", "usr/share/man", "usr/share/locale", "usr/share/info"} {
		if err := emptyDir(filepath.Join(root, dir)); err != nil {
			return "", err
		}
	}
	return out, packTarball(root, out)
}

// busyboxImage returns the cached busybox tarball: Debian's static busybox
// with its applet links, /etc/passwd and nothing else (no C library, no
// loader cache, no ldconfig).
func busyboxImage(cache string) (string, error) {
	out := filepath.Join(cache, busyboxTarball)
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	work, err := os.MkdirTemp(cache, "busybox-build-")
	if err != nil {
		return "", fmt.Errorf("create build dir: %w", err)
	}
	defer os.RemoveAll(work)
	bb, err := staticBusybox(work)
	if err != nil {
		return "", err
	}
	root := filepath.Join(work, "root")
	for _, d := range []string{"bin", "sbin", "usr/bin", "usr/sbin", "usr/local/bin", "etc", "root", "tmp", "dev", "proc", "sys"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return "", fmt.Errorf("create image dir: %w", err)
		}
	}
	if err := os.Chmod(filepath.Join(root, "tmp"), 0o1777); err != nil {
		return "", err
	}
	if err := copyFile(bb, filepath.Join(root, "bin/busybox"), 0o755); err != nil {
		return "", err
	}
	if msg, err := exec.Command("chroot", root, "/bin/busybox", "--install", "-s").CombinedOutput(); err != nil {
		return "", fmt.Errorf("busybox --install -s: %w\n%s", err, msg)
	}
	files := map[string]string{
		"etc/passwd": "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n",
		"etc/group":  "root:x:0:\nnogroup:x:65534:\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(root, name), []byte(content), 0o644); err != nil {
			return "", err
		}
	}
	return out, packTarball(root, out)
}

// staticBusybox finds the busybox binary of Debian's busybox-static
// package: the installed one, or the package downloaded by apt.
func staticBusybox(work string) (string, error) {
	if owner, err := exec.Command("dpkg-query", "-S", "/bin/busybox").Output(); err == nil &&
		strings.HasPrefix(string(owner), "busybox-static:") {
		return "/bin/busybox", testbin.CheckStatic("/bin/busybox")
	}
	dl := filepath.Join(work, "deb")
	if err := os.MkdirAll(dl, 0o755); err != nil {
		return "", err
	}
	cmd := exec.Command("apt-get", "download", "busybox-static")
	cmd.Dir = dl
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("apt-get download busybox-static (run apt-get update first?): %w\n%s", err, msg)
	}
	debs, _ := filepath.Glob(filepath.Join(dl, "busybox-static_*.deb"))
	if len(debs) != 1 {
		return "", fmt.Errorf("apt-get download busybox-static left %d packages in %s", len(debs), dl)
	}
	x := filepath.Join(work, "pkg")
	if msg, err := exec.Command("dpkg-deb", "-x", debs[0], x).CombinedOutput(); err != nil {
		return "", fmt.Errorf("dpkg-deb -x %s: %w\n%s", debs[0], err, msg)
	}
	bb := filepath.Join(x, "bin/busybox")
	return bb, testbin.CheckStatic(bb)
}

// packTarball writes root into out atomically, so an interrupted build
// never leaves a truncated image in the cache.
func packTarball(root, out string) error {
	tmp := out + ".partial"
	if msg, err := exec.Command("tar", "-C", root, "--numeric-owner", "-cf", tmp, ".").CombinedOutput(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("tar %s: %w\n%s", root, err, msg)
	}
	if err := os.Rename(tmp, out); err != nil {
		return fmt.Errorf("store image: %w", err)
	}
	return nil
}

// extractImage unpacks an image tarball into dir, owners and modes intact.
func extractImage(tarball, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if msg, err := exec.Command("tar", "-C", dir, "--numeric-owner", "-xpf", tarball).CombinedOutput(); err != nil {
		return fmt.Errorf("extract %s: %w\n%s", tarball, err, msg)
	}
	return nil
}

// aptMirror returns the archive URI apt uses here for suite, read from
// etcApt's sources.list (one-line format) and sources.list.d (*.list and
// deb822 *.sources). Debian's mirror is only reachable through the source
// apt is configured with, so debootstrap must use the same one.
func aptMirror(etcApt, suite string) (string, error) {
	files := []string{filepath.Join(etcApt, "sources.list")}
	for _, pattern := range []string{"*.list", "*.sources"} {
		m, _ := filepath.Glob(filepath.Join(etcApt, "sources.list.d", pattern))
		files = append(files, m...)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("read apt sources: %w", err)
		}
		var uri string
		if strings.HasSuffix(f, ".sources") {
			uri = deb822Mirror(bytes.NewReader(data), suite)
		} else {
			uri = oneLineMirror(bytes.NewReader(data), suite)
		}
		if uri != "" {
			return uri, nil
		}
	}
	return "", fmt.Errorf("no apt source for suite %s in %s: add one (debootstrap uses apt's mirror)", suite, etcApt)
}

func oneLineMirror(r io.Reader, suite string) string {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		f := strings.Fields(line)
		if len(f) < 3 || f[0] != "deb" {
			continue
		}
		f = f[1:]
		if strings.HasPrefix(f[0], "[") { // [arch=amd64 signed-by=...]
			for len(f) > 0 && !strings.HasSuffix(f[0], "]") {
				f = f[1:]
			}
			if len(f) > 0 {
				f = f[1:]
			}
		}
		if len(f) >= 2 && f[1] == suite {
			return f[0]
		}
	}
	return ""
}

func deb822Mirror(r io.Reader, suite string) string {
	stanza := map[string]string{}
	match := func() string {
		defer clear(stanza)
		if strings.EqualFold(stanza["enabled"], "no") || !hasField(stanza["types"], "deb") || !hasField(stanza["suites"], suite) {
			return ""
		}
		if uris := strings.Fields(stanza["uris"]); len(uris) > 0 {
			return uris[0]
		}
		return ""
	}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		if strings.TrimSpace(line) == "" {
			if uri := match(); uri != "" {
				return uri
			}
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok && !strings.HasPrefix(line, " ") && !strings.HasPrefix(line, "\t") {
			stanza[strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(v)
		}
	}
	return match()
}

func hasField(list, want string) bool {
	for _, f := range strings.Fields(list) {
		if f == want {
			return true
		}
	}
	return false
}

func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(src, dst string, mode os.FileMode) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	if err := os.WriteFile(dst, data, mode); err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	return os.Chmod(dst, mode)
}

// tail returns the last n lines of out, where build tools put the error.
func tail(out []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
