package metricsserver

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// ListenFlag is Listen for a command whose flag addrFlag set opt.Addr and
// whose --web-config-file set opt.WebConfigFile: a failure is the one line
// every command serving metrics prints, naming the flag to fix.
func ListenFlag(opt Options, g prometheus.Gatherer, addrFlag string) (*Server, error) {
	srv, err := Listen(opt, g)
	switch {
	case errors.Is(err, ErrWebConfig):
		return nil, fmt.Errorf("metrics: %w: fix --web-config-file", err)
	case err != nil:
		return nil, fmt.Errorf("metrics: %w: pick a free address with %s", err, addrFlag)
	}
	return srv, nil
}
