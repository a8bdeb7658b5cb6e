package config

import (
	"os"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/coldrun"
)

// fileEnv names the config file the cold runs load.
const fileEnv = "WSL_GPU_CONFIG_COLD_FILE"

// TestMain lets BenchmarkColdLoad re-run this binary to load one config
// file and exit: a hook loads its configuration once per process, and a
// warm loop hides what the first load costs.
func TestMain(m *testing.M) {
	coldrun.Main(map[string]coldrun.Func{
		"fast":      coldLoad(true),
		"unmarshal": coldLoad(false),
	})
	os.Exit(m.Run())
}

// coldLoad loads the file in $WSL_GPU_CONFIG_COLD_FILE as Load does (fast)
// or with go-toml's Unmarshal alone, as Load did before.
func coldLoad(fast bool) coldrun.Func {
	return func() (func() error, error) {
		path := os.Getenv(fileEnv)
		return func() error {
			_, err := load(path, true, fast)
			return err
		}, nil
	}
}

// BenchmarkColdLoad: what loading the shipped config.toml costs in a fresh
// process, as in each hook run, with the fast decoder and with Unmarshal
// alone, alternating run by run so both see the same machine. The metrics
// <mode>-cold-us/op and <mode>-faults/op are medians of the runs' own
// measurements; ns/op includes starting the processes.
func BenchmarkColdLoad(b *testing.B) {
	path, err := os.Getwd()
	if err != nil {
		b.Fatal(err)
	}
	coldrun.Bench(b, []string{"fast", "unmarshal"}, fileEnv+"="+path+"/config.toml")
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
