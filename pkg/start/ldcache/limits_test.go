package ldcache

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestLimits: an image's cache with a string or an entry count beyond what
// ldconfig writes is not a cache (the hook then replaces it), at the limit
// it is merged as usual.
func TestLimits(t *testing.T) {
	entry := func(key, path string) Entry {
		return Entry{Key: key, Path: path, Flags: FlagX8664Libc6}
	}
	many := func(n int) []Entry {
		es := make([]Entry, n)
		for i := range es {
			es[i] = entry(fmt.Sprintf("lib%d.so", i), fmt.Sprintf("/l/lib%d.so", i))
		}
		return es
	}
	long := func(n int) string { return "lib" + strings.Repeat("x", n-6) + ".so" }
	tests := []struct {
		name    string
		entries []Entry
		limit   bool
	}{
		{"key at the limit", []Entry{entry(long(maxString), "/l/a.so")}, false},
		{"key over the limit", []Entry{entry(long(maxString+1), "/l/a.so")}, true},
		{"path at the limit", []Entry{entry("liba.so", "/"+strings.Repeat("p", maxString-1))}, false},
		{"path over the limit", []Entry{entry("liba.so", "/"+strings.Repeat("p", maxString))}, true},
		{"entries at the limit", many(maxEntries), false},
		{"entries over the limit", many(maxEntries + 1), true},
	}
	add := []Entry{entry("libcuda.so.1", "/usr/lib/wsl/lib/libcuda.so.1")}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			existing, err := refEncode(tt.entries)
			if err != nil {
				t.Fatal(err)
			}
			_, err = Merge(existing, add)
			if tt.limit != errors.Is(err, errLimit) || tt.limit != errors.Is(err, ErrFormat) {
				t.Errorf("Merge error = %v, want a limit error: %v", err, tt.limit)
			}
		})
	}
}
