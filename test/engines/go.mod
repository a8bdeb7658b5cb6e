module github.com/wsl-gpu-hook/wsl-gpu-hook/test/engines

go 1.26.0

require (
	github.com/moby/sys/mountinfo v0.7.2
	github.com/opencontainers/runtime-spec v1.3.0
	github.com/wsl-gpu-hook/wsl-gpu-hook v0.0.0
	google.golang.org/grpc v1.82.1
	k8s.io/cri-api v0.28.4
)

require (
	github.com/gogo/protobuf v1.3.2 // indirect
	golang.org/x/net v0.57.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.41.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260526163538-3dc84a4a5aaa // indirect
	google.golang.org/protobuf v1.36.12-0.20260120151049-f2248ac996af // indirect
)

// The engine tests run the hook of this checkout.
replace github.com/wsl-gpu-hook/wsl-gpu-hook => ../..
