module github.com/wsl-gpu-hook/wsl-gpu-hook/test/k8s

go 1.26.0

require github.com/moby/sys/mountinfo v0.7.2

require golang.org/x/sys v0.1.0 // indirect
