// Package containernames gives the names people know a container by (its
// Kubernetes namespace, pod and container name; its Docker or podman
// name) from the id a process's cgroup names, so that GPU figures are
// read per pod and container rather than per hex id.
//
// # Sources
//
//   - The kubelet's container log links ([KubeletLogs]): for every
//     container it runs, the kubelet links its log as
//     /var/log/containers/<pod>_<namespace>_<container>-<id>.log, the
//     layout log collectors rely on. Reading that directory costs one
//     getdents and no API call, needs no credential, and the names come
//     from the kubelet, not from the container: a container can write
//     its own environment and command line, not its node's log dir. A
//     mount of the directory alone shows the link names only: the logs
//     they point at stay out of reach.
//   - Docker's and podman's engine API ([Engine]): GET /containers/json
//     on the engine's socket (podman serves the same API), for `top` on
//     a WSL distro.
//
// A source is read whole each time ([Source.Names]); callers read it as
// often as they scan processes. An engine listing opens one connection
// and closes it with the answer, so a reader that lists every second
// holds no connection in between (dockerd never closes an idle one). Ids are matched by prefix: cgroups give
// the full id, `top` prints 12 digits.
package containernames
