package printable

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestString(t *testing.T) {
	tests := []struct {
		name, in string
		max      int
		want     string
	}{
		{"plain", "gpu-worker", Label, "gpu-worker"},
		{"spaces and backslashes stay", `my app\1`, Label, `my app\1`},
		{"text in any script stays", "Grafikkarte ÄÖÜ 日本 ✓", Label, "Grafikkarte ÄÖÜ 日本 ✓"},
		{"a real U+FFFD stays", "a\ufffdb", Label, "a\ufffdb"},
		{"invalid bytes become U+FFFD", "\xff\xfeok\xc3", Label, "\ufffd\ufffdok\ufffd"},
		{"C0 controls are escaped", "a\x1b[31mb\x07\r\n\t\x00", Label, `a\x1b[31mb\x07\x0d\x0a\x09\x00`},
		{"DEL is escaped", "a\x7fb", Label, `a\x7fb`},
		{"C1 controls are escaped", "a\u009b2Jb\u0085", Label, `a\x9b2Jb\x85`},
		{"bidi overrides and separators are escaped", "abc\u202edcb\u2028\u200b", Label, `abc\u202edcb\u2028\u200b`},
		{"a format character outside the BMP", "x\U000e0001", Label, `x\U000e0001`},
		{"cut with an ellipsis", "abcdefghij", 8, "abcde…"},
		{"exactly max is not cut", "abcdefgh", 8, "abcdefgh"},
		{"an escape is never cut in half", "ab\x1b\x1b", 8, `ab…`},
		{"a rune is never cut in half", "ab日本語", 8, "ab日…"},
		{"max below the ellipsis", "abcdef", 2, ""},
		{"empty", "", Label, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := String(tt.in, tt.max)
			if got != tt.want {
				t.Errorf("String(%q, %d) = %q, want %q", tt.in, tt.max, got, tt.want)
			}
		})
	}
}

func FuzzString(f *testing.F) {
	for _, s := range []string{"gpu-worker", "\xff\x1b[31m\x9b", "日本\u202e", strings.Repeat("\x00", 40)} {
		f.Add(s, Label)
	}
	f.Fuzz(func(t *testing.T, s string, max int) {
		if max < 0 || max > 1<<12 {
			return
		}
		got := String(s, max)
		if len(got) > max {
			t.Fatalf("len %d > max %d: %q", len(got), max, got)
		}
		if !utf8.ValidString(got) {
			t.Fatalf("not UTF-8: %q", got)
		}
		for _, r := range got {
			if r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 || r == '\u202e' || r == '\u2028' {
				t.Fatalf("control %U left in %q", r, got)
			}
		}
		if String(got, max+len(got)) != got {
			t.Fatalf("not idempotent on %q", got)
		}
	})
}

// TestUniqueKeepsValuesApart: two pods whose names share their first
// 125 bytes made two identical series, and the registry then refused the
// whole scrape (500). Values String makes equal must stay apart under
// Unique; values String leaves alone stay as they are.
func TestUniqueKeepsValuesApart(t *testing.T) {
	long := strings.Repeat("a", 200)
	pairs := []struct {
		name, a, b string
		// clash: String gives both the same text (what failed scrapes);
		// the others are values whose Unique results could meet if the
		// tag were careless.
		clash bool
	}{
		{"alike in the first 200 bytes", long + "-0", long + "-1", true},
		{"alike in the first 126 bytes", long[:126] + "xyz", long[:126] + "xyw", true},
		{"invalid bytes", "pod\xff", "pod\xfe", true},
		{"an escape and its spelling", "pod\x1b", `pod\x1b`, true},
		{"a cut value and its own text", long, String(long, Label), true},
		{"a tagged value and its own text", "pod\xff", Unique("pod\xff", Label), false},
	}
	for _, p := range pairs {
		t.Run(p.name, func(t *testing.T) {
			if clash := String(p.a, Label) == String(p.b, Label); clash != p.clash {
				t.Fatalf("String(%q) == String(%q) is %v: the case does not test what it says", p.a, p.b, clash)
			}
			ua, ub := Unique(p.a, Label), Unique(p.b, Label)
			if ua == ub {
				t.Errorf("Unique(%q) = Unique(%q) = %q", p.a, p.b, ua)
			}
			for _, u := range []string{ua, ub} {
				if len(u) > Label || !utf8.ValidString(u) || String(u, Label) != u {
					t.Errorf("Unique gave %q: over %d bytes or not printable", u, Label)
				}
			}
			if Unique(p.a, Label) != ua {
				t.Errorf("Unique(%q) is not the same twice", p.a)
			}
		})
	}
	for _, s := range []string{"", "trainer-0", "claim ml/gpu", "NVIDIA GeForce RTX 3060 Laptop GPU", long[:Label]} {
		if got := Unique(s, Label); got != s {
			t.Errorf("Unique(%q) = %q, want it unchanged", s, got)
		}
	}
	if got := Unique(long, Label); !strings.HasPrefix(got, long[:Label-tagLen-len("…")]+"…~") || len(got) != Label {
		t.Errorf("Unique of a long name = %q, want its start, …, ~ and the hash, %d bytes", got, Label)
	}
}

// FuzzUnique: two different values never give the same result.
func FuzzUnique(f *testing.F) {
	f.Add("pod\xff", "pod\xfe", Label)
	f.Add(strings.Repeat("a", 200)+"0", strings.Repeat("a", 200)+"1", Label)
	f.Fuzz(func(t *testing.T, a, b string, max int) {
		if max < tagLen || max > 1<<12 || a == b {
			return
		}
		if ua, ub := Unique(a, max), Unique(b, max); ua == ub {
			t.Fatalf("Unique(%q) = Unique(%q) = %q", a, b, ua)
		}
	})
}
