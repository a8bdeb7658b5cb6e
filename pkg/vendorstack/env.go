package vendorstack

import "strings"

// MergeEnv appends to env the variables it does not set yet: what the user
// set wins (their ZE_AFFINITY_MASK, their DISPLAY), as it should for a
// convenience. It returns the new list and the variables it left out.
func MergeEnv(env []string, add []Var) (merged []string, kept []Var) {
	set := map[string]bool{}
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		set[k] = true
	}
	merged = append([]string{}, env...)
	for _, v := range add {
		if set[v.Name] {
			kept = append(kept, v)
			continue
		}
		set[v.Name] = true
		merged = append(merged, v.String())
	}
	return merged, kept
}
