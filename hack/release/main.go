// Command release builds what a release ships, reproducibly: the deb, rpm
// and apk packages from packaging/nfpm.yaml (nfpm v2 as a library), tar
// archives with fixed owners and times, the Helm chart with its version
// stamped, and one CycloneDX SBOM per artifact. Every time it writes is
// SOURCE_DATE_EPOCH (the commit's time), every owner root. hack/packages.sh
// and hack/release.sh drive it; it is never shipped.
//
//	release version -describe D -count N
//	release pkg -config packaging/nfpm.yaml -format deb|rpm|apk -arch GOARCH -describe D -count N -commit H -stage DIR -out DIR
//	release scripts -config packaging/nfpm.yaml -format F -out DIR
//	release tar -out FILE.tar.gz -prefix DIR/ SRC=DST[:MODE]...
//	release chart -src deploy/helm/NAME -version SEMVER -app-version TAG -out FILE.tgz
//	release sbom -artifact FILE -name NAME -version V -purl PURL -out FILE BINARY.cdx.json...
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("want a command: version, pkg, scripts, tar, chart or sbom")
	}
	cmds := map[string]func([]string) error{
		"version": versionCmd, "pkg": pkgCmd, "scripts": scriptsCmd, "tar": tarCmd, "chart": chartCmd, "sbom": sbomCmd,
	}
	cmd, ok := cmds[args[0]]
	if !ok {
		return fmt.Errorf("unknown command %q: want version, pkg, scripts, tar, chart or sbom", args[0])
	}
	return cmd(args[1:])
}

// sourceDate is SOURCE_DATE_EPOCH, which every artifact's times are.
func sourceDate() (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q is not a time in seconds: set it to the commit's (git log -1 --format=%%ct)", s)
	}
	return time.Unix(n, 0).UTC(), nil
}
