// Command mkfixture lays out a simulated WSL host tree (usr/lib/wsl/lib and
// usr/lib/wsl/drivers/<folder>) for one simhost profile with fixture.Build.
// The e2e tests run it rather than importing the fixture package so that
// the container tests which need no fixture build and run on their own.
//
//	mkfixture -profile nvidia-laptop -out DIR [-cache DIR]
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/fixture"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/simhost"
)

func main() {
	profile := flag.String("profile", "", "simhost profile name")
	out := flag.String("out", "", "directory to lay the host tree out in")
	cache := flag.String("cache", "", "cache directory for built libraries")
	flag.Parse()
	if err := run(*profile, *out, *cache); err != nil {
		fmt.Fprintf(os.Stderr, "mkfixture: %v\n", err)
		os.Exit(1)
	}
}

func run(profile, out, cache string) error {
	if profile == "" || out == "" {
		return fmt.Errorf("-profile and -out are required")
	}
	p, err := simhost.Lookup(profile)
	if err != nil {
		return err
	}
	if err := fixture.Build(out, p, fixture.Options{CacheDir: cache}); err != nil {
		return fmt.Errorf("build fixture for %s in %s: %w", profile, out, err)
	}
	return nil
}
