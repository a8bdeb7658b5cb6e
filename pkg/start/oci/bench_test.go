package oci

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/coldrun"
)

// stateEnv names the state file the cold runs decode.
const stateEnv = "WSL_GPU_OCI_COLD_STATE"

// TestMain lets BenchmarkColdReadInput re-run this binary to decode one
// state and config.json and exit: a hook decodes once per process, and a
// warm loop hides what the first decode costs.
func TestMain(m *testing.M) {
	coldrun.Main(map[string]coldrun.Func{"fast": coldDecode(true), "json": coldDecode(false)})
	os.Exit(m.Run())
}

// coldDecode reads the state in $WSL_GPU_OCI_COLD_STATE and the config.json
// it names, as the hook does (fast) or with json.Unmarshal into the same
// types, as the hook did before.
func coldDecode(fast bool) coldrun.Func {
	return func() (func() error, error) {
		data, err := os.ReadFile(os.Getenv(stateEnv))
		if err != nil {
			return nil, err
		}
		if fast {
			return func() error {
				st, err := ReadState(strings.NewReader(string(data)))
				if err == nil {
					_, err = LoadSpec(st.Bundle)
				}
				return err
			}, nil
		}
		return func() error {
			var st specs.State
			if err := json.Unmarshal(data, &st); err != nil {
				return err
			}
			cfg, err := os.ReadFile(filepath.Join(st.Bundle, "config.json"))
			if err != nil {
				return err
			}
			var s Spec
			return json.Unmarshal(cfg, &s)
		}, nil
	}
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
// types ("json"), alternating run by run. The metrics <mode>-cold-us/op
// and <mode>-faults/op are medians of the runs' own measurements; ns/op
// includes starting the processes.
func BenchmarkColdReadInput(b *testing.B) {
	for _, cfg := range benchConfigs {
		state, _ := benchBundle(b, cfg)
		b.Run(strings.TrimSuffix(cfg, ".json"), func(b *testing.B) {
			coldrun.Bench(b, []string{"fast", "json"}, stateEnv+"="+state)
		})
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

// BenchmarkDecode is the decoding alone, from memory: no file I/O, whose
// cost on a loaded machine hides the decoder's.
func BenchmarkDecode(b *testing.B) {
	for _, cfg := range benchConfigs {
		data, err := os.ReadFile(filepath.Join("testdata", cfg))
		if err != nil {
			b.Fatal(err)
		}
		state := []byte(`{"ociVersion":"1.2.1","id":"bench","status":"creating","pid":4242,"bundle":"/run/b","annotations":{"io.container.manager":"libpod","org.opencontainers.image.stopSignal":"15"}}`)
		b.Run(strings.TrimSuffix(cfg, ".json"), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := decodeState(state); err != nil {
					b.Fatal(err)
				}
				if _, err := decodeSpec(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
