package oci

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// coldEnv makes the test binary decode one state and config.json and exit:
// BenchmarkColdReadInput runs it so, because a hook decodes once per
// process, and a warm loop hides what the first decode costs.
const coldEnv = "WSL_GPU_OCI_COLD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(coldEnv); mode != "" {
		os.Exit(coldDecode(mode))
	}
	os.Exit(m.Run())
}

// coldDecode reads the state in $WSL_GPU_OCI_COLD_STATE and the config.json
// it names, as the hook does (mode "fast") or with json.Unmarshal into the
// same types, as the hook did before (mode "encoding/json"), and prints
// the microseconds it took.
func coldDecode(mode string) int {
	data, err := os.ReadFile(os.Getenv(coldEnv + "_STATE"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	start := time.Now()
	if mode == "fast" {
		var st *specs.State
		if st, err = ReadState(strings.NewReader(string(data))); err == nil {
			_, err = LoadSpec(st.Bundle)
		}
	} else {
		var st specs.State
		if err = json.Unmarshal(data, &st); err == nil {
			var cfg []byte
			if cfg, err = os.ReadFile(filepath.Join(st.Bundle, "config.json")); err == nil {
				var s Spec
				err = json.Unmarshal(cfg, &s)
			}
		}
	}
	elapsed := time.Since(start)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(elapsed.Microseconds())
	return 0
}

// benchBundle writes a bundle with the named testdata config.json and a
// state naming it, and returns the state file.
func benchBundle(b *testing.B, config string) (state string, stateData []byte) {
	b.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", config))
	if err != nil {
		b.Fatal(err)
	}
	bundle := b.TempDir()
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), data, 0o644); err != nil {
		b.Fatal(err)
	}
	stateData = fmt.Appendf(nil, `{"ociVersion":"1.2.1","id":"bench","status":"creating","pid":4242,"bundle":%q,"annotations":{"io.container.manager":"libpod","org.opencontainers.image.stopSignal":"15"}}`, bundle)
	state = filepath.Join(bundle, "state.json")
	if err := os.WriteFile(state, stateData, 0o644); err != nil {
		b.Fatal(err)
	}
	return state, stateData
}

var benchConfigs = []string{"config-runc-spec.json", "config-docker-like.json"}

// BenchmarkColdReadInput: what ReadState and LoadSpec cost in a fresh
// process, as in each hook run, against json.Unmarshal into the same
// types. The metric cold-us/op is the median of the runs' own timings;
// ns/op includes starting the process.
func BenchmarkColdReadInput(b *testing.B) {
	for _, cfg := range benchConfigs {
		state, _ := benchBundle(b, cfg)
		for _, mode := range []string{"fast", "encoding/json"} {
			b.Run(strings.TrimSuffix(cfg, ".json")+"/"+mode, func(b *testing.B) {
				var us []float64
				for b.Loop() {
					cmd := exec.Command(os.Args[0])
					cmd.Env = append(os.Environ(), coldEnv+"="+mode, coldEnv+"_STATE="+state)
					out, err := cmd.Output()
					if err != nil {
						b.Fatalf("%v: %s", err, out)
					}
					v, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
					if err != nil {
						b.Fatal(err)
					}
					us = append(us, v)
				}
				slices.Sort(us)
				b.ReportMetric(us[len(us)/2], "cold-us/op")
			})
		}
	}
}

// BenchmarkReadInput is the warm loop: decoding itself, without the first
// call's setup.
func BenchmarkReadInput(b *testing.B) {
	for _, cfg := range benchConfigs {
		_, stateData := benchBundle(b, cfg)
		b.Run(strings.TrimSuffix(cfg, ".json"), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				st, err := ReadState(strings.NewReader(string(stateData)))
				if err != nil {
					b.Fatal(err)
				}
				if _, err := LoadSpec(st.Bundle); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
