package driverstore

import (
	"errors"
	"fmt"
	"strings"
)

// repository is the component libdxg looks for, matched ignoring ASCII case
// as Windows paths are.
const repository = `\FileRepository\`

// FolderName maps the Windows driver store path the host returns for an
// adapter (\SystemRoot\System32\DriverStore\FileRepository\<folder>,
// C:\Windows\..., \\?\C:\..., \??\C:\..., any case) to its folder relative
// to the drivers dir, the way libdxg does: everything after the first
// \FileRepository\, backslashes turned into slashes, case kept.
//
// The host is not trusted: the result is always a clean relative path that
// stays inside the drivers dir (normally one component). Empty components,
// "." and anything containing "..", NUL and control characters are refused
// with an error saying why.
func FolderName(windowsPath string) (string, error) {
	if windowsPath == "" {
		return "", errors.New("empty driver store path")
	}
	i := indexFold(windowsPath, repository)
	if i < 0 {
		return "", fmt.Errorf("driver store path %q has no %s component", windowsPath, repository)
	}
	rest := windowsPath[i+len(repository):]
	// A trailing separator names the same folder.
	rest = strings.TrimSuffix(rest, `\`)
	if rest == "" {
		return "", fmt.Errorf("driver store path %q names no folder after %s", windowsPath, repository)
	}
	// Windows takes / as a separator too, and on Linux it is one.
	parts := strings.Split(strings.ReplaceAll(rest, `\`, "/"), "/")
	for _, p := range parts {
		if p == "" {
			return "", fmt.Errorf("driver store path %q has an empty component after %s", windowsPath, repository)
		}
		if err := checkComponent(p); err != nil {
			return "", fmt.Errorf("driver store path %q: %w", windowsPath, err)
		}
	}
	return strings.Join(parts, "/"), nil
}

// checkComponent refuses a path component that could leave the drivers dir
// or corrupt the mount table and logs it ends up in.
func checkComponent(c string) error {
	switch {
	case c == ".":
		return errors.New(`component "." is not a folder`)
	case strings.Contains(c, ".."):
		return fmt.Errorf("component %q contains \"..\"", c)
	}
	for _, r := range c {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("component %q contains control character %U", c, r)
		}
	}
	return nil
}

// indexFold is strings.Index ignoring ASCII case. Unlike strings.ToLower it
// never changes byte offsets, so the index is valid in s.
func indexFold(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if asciiEqualFold(s[i:i+len(sub)], sub) {
			return i
		}
	}
	return -1
}

func asciiEqualFold(a, b string) bool {
	for i := 0; i < len(a); i++ {
		if lower(a[i]) != lower(b[i]) {
			return false
		}
	}
	return true
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
