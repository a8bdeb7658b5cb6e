package gpustats

import (
	"os"
	"testing"
)

// BenchmarkDxgProcesses is the /proc scan one sample pays for per-process
// figures: every fd link of every process is read. Compare with
// BenchmarkReadProcDirs (the listing alone) in the same run.
func BenchmarkDxgProcesses(b *testing.B) {
	for b.Loop() {
		if _, err := DxgProcesses("/proc", "/dev/null"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReadProcDirs(b *testing.B) {
	for b.Loop() {
		if _, err := os.ReadDir("/proc"); err != nil {
			b.Fatal(err)
		}
	}
}
