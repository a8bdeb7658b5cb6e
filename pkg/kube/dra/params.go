package dra

import (
	"encoding/json"
	"fmt"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
)

// checkParams refuses opaque configs addressed to this driver: it
// understands no parameters, and preparing a claim as if they were not
// there would give the pod something other than what it asked for. The
// allocation carries the claim's configs and its DeviceClasses' (Source
// says which); configs for other drivers are theirs to judge, as the API
// says.
func checkParams(configs []resourceapi.DeviceAllocationConfiguration) error {
	for _, c := range configs {
		if c.Opaque == nil || c.Opaque.Driver != DriverName {
			continue
		}
		var what []string
		var head struct {
			Kind string `json:"kind"`
		}
		if json.Unmarshal(c.Opaque.Parameters.Raw, &head) == nil && head.Kind != "" {
			what = append(what, "kind "+head.Kind)
		}
		if c.Source == resourceapi.AllocationConfigSourceClass {
			what = append(what, "from its DeviceClass")
		} else {
			what = append(what, "from the claim")
		}
		switch len(c.Requests) {
		case 0:
			what = append(what, "for every request")
		case 1:
			what = append(what, "for request "+c.Requests[0])
		default:
			what = append(what, "for requests "+strings.Join(c.Requests, ", "))
		}
		return fmt.Errorf("opaque parameters for driver %s (%s) are not understood: the driver takes no parameters: remove the opaque config and select the adapter with CEL selectors on its attributes", DriverName, strings.Join(what, ", "))
	}
	return nil
}
