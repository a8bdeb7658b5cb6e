// Package podresources reads which pod and container holds each adapter,
// from the kubelet's PodResources API (the socket
// /var/lib/kubelet/pod-resources/kubelet.sock): the devices the device
// plugin allocated, by device ID, and the DRA claims' devices, by the
// driver's device name. Both are the adapter's identity (package
// adapterid), so a metric labelled with it joins with what the API says,
// as dcgm-exporter labels NVIDIA's GPUs with their pods.
package podresources
