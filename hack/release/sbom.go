package main

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
)

// sbomCmd writes one artifact's SBOM from the SBOMs of the binaries in it
// (cyclonedx-gomod bin, which reads the modules each binary was linked
// from): the artifact is the BOM's subject, with its SHA-256; each binary
// is a component of it, with its own hashes and build settings; the
// modules are the binaries' dependencies.
func sbomCmd(args []string) error {
	fs := flag.NewFlagSet("sbom", flag.ContinueOnError)
	artifact := fs.String("artifact", "", "the file the SBOM describes")
	name := fs.String("name", "wsl-gpu-hook", "the artifact's name")
	ver := fs.String("version", "", "the artifact's version")
	purl := fs.String("purl", "", "the artifact's package URL")
	out := fs.String("out", "", "the SBOM to write (CycloneDX JSON)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *artifact == "" || *ver == "" || *purl == "" || *out == "" || fs.NArg() == 0 {
		return fmt.Errorf("sbom: want -artifact, -version, -purl, -out and the binaries' SBOMs")
	}
	when, err := sourceDate()
	if err != nil {
		return err
	}
	sum, err := fileSHA256(*artifact)
	if err != nil {
		return err
	}
	subject := cdx.Component{
		BOMRef: *purl, Type: cdx.ComponentTypeApplication, Name: *name, Version: *ver, PackageURL: *purl,
		Hashes:     &[]cdx.Hash{{Algorithm: cdx.HashAlgoSHA256, Value: sum}},
		Licenses:   &cdx.Licenses{{License: &cdx.License{ID: "Apache-2.0"}}},
		Properties: &[]cdx.Property{{Name: "wsl-gpu-hook:artifact:file", Value: filepath.Base(*artifact)}},
	}
	bom := cdx.NewBOM()
	bom.Metadata = &cdx.Metadata{Timestamp: when.Format(time.RFC3339), Component: &subject}
	components := map[string]cdx.Component{}
	deps := map[string][]string{}
	var binaries []string
	for _, f := range fs.Args() {
		b, err := readBOM(f)
		if err != nil {
			return err
		}
		if b.Metadata == nil || b.Metadata.Component == nil {
			return fmt.Errorf("sbom: %s describes no binary", f)
		}
		bin := *b.Metadata.Component
		bin.Properties = b.Metadata.Properties // the binary's hashes and build settings
		// The project's own code: cyclonedx-gomod finds no license for a
		// module version the module proxy does not serve.
		bin.Licenses = subject.Licenses
		if bom.Metadata.Tools == nil {
			bom.Metadata.Tools = b.Metadata.Tools
		}
		components[bin.BOMRef] = bin
		binaries = append(binaries, bin.BOMRef)
		if b.Components != nil {
			for _, c := range *b.Components {
				components[c.BOMRef] = c
			}
		}
		if b.Dependencies != nil {
			for _, d := range *b.Dependencies {
				if d.Dependencies != nil {
					deps[d.Ref] = append(deps[d.Ref], *d.Dependencies...)
				} else if _, ok := deps[d.Ref]; !ok {
					deps[d.Ref] = nil
				}
			}
		}
	}
	deps[subject.BOMRef] = binaries

	refs := make([]string, 0, len(components))
	for r := range components {
		refs = append(refs, r)
	}
	sort.Strings(refs)
	list := make([]cdx.Component, 0, len(refs))
	for _, r := range refs {
		list = append(list, components[r])
	}
	bom.Components = &list
	refs = refs[:0]
	for r := range deps {
		refs = append(refs, r)
	}
	sort.Strings(refs)
	dl := make([]cdx.Dependency, 0, len(refs))
	for _, r := range refs {
		on := slices.Compact(slices.Sorted(slices.Values(deps[r])))
		d := cdx.Dependency{Ref: r}
		if len(on) > 0 {
			d.Dependencies = &on
		}
		dl = append(dl, d)
	}
	bom.Dependencies = &dl

	w, err := os.Create(*out)
	if err != nil {
		return err
	}
	defer w.Close()
	if err := cdx.NewBOMEncoder(w, cdx.BOMFileFormatJSON).SetPretty(true).EncodeVersion(bom, cdx.SpecVersion1_6); err != nil {
		return fmt.Errorf("sbom: write %s: %w", *out, err)
	}
	return w.Close()
}

func readBOM(path string) (*cdx.BOM, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var b cdx.BOM
	if err := cdx.NewBOMDecoder(f, cdx.BOMFileFormatJSON).Decode(&b); err != nil {
		return nil, fmt.Errorf("sbom: read %s: %w", path, err)
	}
	return &b, nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
