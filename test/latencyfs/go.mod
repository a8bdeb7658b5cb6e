module github.com/wsl-gpu-hook/wsl-gpu-hook/test/latencyfs

go 1.26.0

require github.com/hanwen/go-fuse/v2 v2.12.1

require golang.org/x/sys v0.28.0 // indirect
