package main

import (
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
)

// chartVersionRe finds Chart.yaml's version and appVersion lines.
var chartVersionRe = regexp.MustCompile(`(?m)^(version|appVersion): .*$`)

// chartCmd writes the chart as `helm package` lays it out (NAME/ and its
// files in a .tgz), with Chart.yaml's version and appVersion set to the
// release's: the image the release ships is tagged with appVersion, which
// the chart pulls when image.tag is not set.
func chartCmd(args []string) error {
	fset := flag.NewFlagSet("chart", flag.ContinueOnError)
	src := fset.String("src", "", "the chart's directory")
	ver := fset.String("version", "", "the chart's version (SemVer)")
	app := fset.String("app-version", "", "the image tag the chart pulls by default")
	out := fset.String("out", "", "the .tgz to write")
	if err := fset.Parse(args); err != nil {
		return err
	}
	if *src == "" || *ver == "" || *app == "" || *out == "" {
		return fmt.Errorf("chart: want -src, -version, -app-version and -out")
	}
	when, err := sourceDate()
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "release-chart-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	meta, err := os.ReadFile(filepath.Join(*src, "Chart.yaml"))
	if err != nil {
		return err
	}
	stamped, err := stampChart(meta, *ver, *app)
	if err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(*src, "Chart.yaml"), err)
	}
	chartYAML := filepath.Join(tmp, "Chart.yaml")
	if err := os.WriteFile(chartYAML, stamped, 0o644); err != nil {
		return err
	}
	name := filepath.Base(filepath.Clean(*src))
	var files []entry
	err = filepath.WalkDir(*src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(*src, p)
		if err != nil {
			return err
		}
		if rel == "Chart.yaml" {
			p = chartYAML
		}
		files = append(files, entry{name: path.Join(name, filepath.ToSlash(rel)), src: p, mode: 0o644})
		return nil
	})
	if err != nil {
		return err
	}
	return writeTarGz(*out, files, when)
}

// stampChart sets Chart.yaml's version and appVersion, which must each be
// there once.
func stampChart(meta []byte, ver, app string) ([]byte, error) {
	seen := map[string]int{}
	out := chartVersionRe.ReplaceAllFunc(meta, func(line []byte) []byte {
		k := chartVersionRe.FindSubmatch(line)[1]
		seen[string(k)]++
		if string(k) == "version" {
			return []byte(fmt.Sprintf("version: %s", ver))
		}
		return []byte(fmt.Sprintf("appVersion: %q", app))
	})
	if seen["version"] != 1 || seen["appVersion"] != 1 {
		return nil, fmt.Errorf("want one version: and one appVersion: line, found %d and %d", seen["version"], seen["appVersion"])
	}
	return out, nil
}
