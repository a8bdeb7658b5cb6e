// Package printable makes text that others choose safe to show: process
// names (any process that opens /dev/dxg sets its own, with prctl or
// /proc/self/comm, to any 15 bytes), and the names and descriptions a
// driver reports. `wsl-gpu-ctl top` prints them to a person's terminal
// and the metrics endpoint puts them in label values; both go through
// String.
//
// The result is valid UTF-8 (a byte that is not UTF-8 becomes U+FFFD, as
// Prometheus and encoding/json would make it), holds no character a
// terminal acts on (C0 controls, DEL, C1 controls, and every other
// non-graphic character such as bidirectional overrides and line
// separators, each shown as a Go escape: \x1b, \x9b, \u202e), and is at
// most the length asked for. Graphic text, spaces and backslashes pass
// unchanged, so a name that spells "\x1b" itself reads the same as an
// escaped ESC: the output is for reading, not for parsing back.
//
// Unique is String for text that tells things apart, a label value
// above all: where String changes a value (cuts it, replaces or escapes
// a byte), Unique also ends it in a short hash of the whole value, so
// two values String would make equal (two pod names alike in their first
// 128 bytes) stay two series instead of failing the scrape.
package printable
