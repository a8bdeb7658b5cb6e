module github.com/wsl-gpu-hook/wsl-gpu-hook/test/latencyfs

go 1.26.0

require (
	github.com/hanwen/go-fuse/v2 v2.12.1
	github.com/wsl-gpu-hook/wsl-gpu-hook v0.0.0
)

require golang.org/x/sys v0.49.0 // indirect

// test/hostdelay: the precise wait dxgsim's host latency uses too.
replace github.com/wsl-gpu-hook/wsl-gpu-hook => ../..
