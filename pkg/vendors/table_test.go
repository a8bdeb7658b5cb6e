package vendors_test

import (
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/vendors"
)

// No package but this one spells a vendor id: a second table is how the
// NPU came to be a GPU in one package and not in another. The test scans
// every Go file of the project's packages and commands (tests and the
// simulator under test/ describe hosts, and may) for an integer literal
// equal to an id of the table.
func TestNoVendorIDOutsideTheTable(t *testing.T) {
	ids := map[uint64]bool{}
	for _, id := range vendors.IDs() {
		ids[uint64(id.ID)] = true
	}
	root := filepath.Join("..", "..")
	var found []string
	for _, top := range []string{"pkg", "cmd", "config"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if filepath.Base(path) == "vendors" && filepath.Dir(path) == filepath.Join(root, "pkg") || filepath.Base(path) == "testdata" {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			fset := token.NewFileSet()
			var s scanner.Scanner
			s.Init(fset.AddFile(path, -1, len(src)), src, nil, scanner.ScanComments)
			for {
				pos, tok, lit := s.Scan()
				if tok == token.EOF {
					break
				}
				if tok == token.COMMENT {
					for _, w := range strings.FieldsFunc(lit, func(r rune) bool { return !strings.ContainsRune("0123456789abcdefABCDEFxX", r) }) {
						if v, err := strconv.ParseUint(w, 0, 64); err == nil && ids[v] && strings.HasPrefix(strings.ToLower(w), "0x") {
							found = append(found, fset.Position(pos).String()+": "+w+" (in a comment)")
						}
					}
					continue
				}
				if tok == token.INT {
					if v, err := strconv.ParseUint(strings.ReplaceAll(lit, "_", ""), 0, 64); err == nil && ids[v] {
						found = append(found, fset.Position(pos).String()+": "+lit)
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range found {
		t.Errorf("%s: a vendor id outside package vendors: add what it decides to the vendor table and ask it there", f)
	}
}

// Every id names a vendor of the table, once.
func TestIDsNameRows(t *testing.T) {
	seen := map[uint32]bool{}
	for _, id := range vendors.IDs() {
		if seen[id.ID] || !id.Vendor.Known() || id.Vendor == vendors.Unknown {
			t.Errorf("id %#x: vendor %q, seen before %v", id.ID, id.Vendor, seen[id.ID])
		}
		seen[id.ID] = true
	}
}
