package config

import _ "embed"

// CDIRefreshUnit is config/systemd/wsl-gpu-hook-cdi.service, which
// `install cdi` writes with the installed binary's path.
//
//go:embed systemd/wsl-gpu-hook-cdi.service
var CDIRefreshUnit string
