package config

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// coldEnv makes the test binary load one config file and exit:
// BenchmarkColdLoad runs it so, because a hook loads its configuration
// once per process, and a warm loop hides what the first load costs.
const coldEnv = "WSL_GPU_CONFIG_COLD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(coldEnv); mode != "" {
		os.Exit(coldLoad(mode))
	}
	os.Exit(m.Run())
}

// coldLoad loads the file in $WSL_GPU_CONFIG_COLD_FILE as Load does (mode
// "fast") or with go-toml's Unmarshal alone, as Load did before (mode
// "unmarshal"), and prints the microseconds it took.
func coldLoad(mode string) int {
	path := os.Getenv(coldEnv + "_FILE")
	start := time.Now()
	_, err := load(path, true, mode == "fast")
	elapsed := time.Since(start)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(elapsed.Microseconds())
	return 0
}

// BenchmarkColdLoad: what loading the shipped config.toml costs in a fresh
// process, as in each hook run, with the fast decoder and with Unmarshal
// alone, alternating run by run so both see the same machine. The metric
// cold-us/op is the median of the runs' own timings; ns/op includes
// starting the process.
func BenchmarkColdLoad(b *testing.B) {
	path, err := os.Getwd()
	if err != nil {
		b.Fatal(err)
	}
	path += "/config.toml"
	us := map[string][]float64{}
	modes := []string{"fast", "unmarshal"}
	for b.Loop() {
		for _, mode := range modes {
			cmd := exec.Command(os.Args[0])
			cmd.Env = append(os.Environ(), coldEnv+"="+mode, coldEnv+"_FILE="+path)
			out, err := cmd.Output()
			if err != nil {
				b.Fatalf("%v: %s", err, out)
			}
			v, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
			if err != nil {
				b.Fatal(err)
			}
			us[mode] = append(us[mode], v)
		}
	}
	for _, mode := range modes {
		slices.Sort(us[mode])
		b.ReportMetric(us[mode][len(us[mode])/2], mode+"-cold-us/op")
	}
}

// BenchmarkLoad is the warm loop: Load itself, without the first call's
// setup.
func BenchmarkLoad(b *testing.B) {
	for _, mode := range []string{"fast", "unmarshal"} {
		b.Run(mode, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := load("config.toml", true, mode == "fast"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
