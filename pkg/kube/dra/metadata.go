package dra

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/dynamic-resource-allocation/api/metadata"
	metadatav1beta1 "k8s.io/dynamic-resource-allocation/api/metadata/v1beta1"
	"k8s.io/utils/ptr"
)

// Attributes the metadata file adds to a device's published ones: what
// this claim was given of it.
const (
	// AttrMemory is the memory promised to the claim, in bytes: its
	// share, or the whole device when it has it alone.
	AttrMemory = "memory"
	// AttrShareID names the share when the device is shared.
	AttrShareID = "shareID"
)

// Environment variables a claim's device sets in the container when the
// claim has that one device (with several, the metadata file lists them):
// what it got, for scripts and for applications that pick an adapter by
// LUID (D3D12, DXCore, DirectML).
const (
	EnvDevice      = "WSL_GPU_DRA_DEVICE"      // the device's name in the pool
	EnvRequest     = "WSL_GPU_DRA_REQUEST"     // the request, with the firstAvailable alternative that won: gpu/discrete
	EnvLUID        = "WSL_GPU_DRA_LUID"        // the adapter's LUID: 0x4486d1
	EnvIndex       = "WSL_GPU_DRA_INDEX"       // its index as `wsl-gpu-hook info` prints it
	EnvDescription = "WSL_GPU_DRA_DESCRIPTION" // the driver's adapter name
	EnvMemory      = "WSL_GPU_DRA_MEMORY"      // bytes promised to the claim (AttrMemory)
)

// claimDevice is one device a claim's request got, as the container
// learns it.
type claimDevice struct {
	request string // as allocated: gpu, or gpu/discrete for a firstAvailable alternative
	device  Device
	pool    string
	shareID string
	memory  int64
}

// env is the variables of a claim that has this one device.
func (c claimDevice) env() []string {
	a := c.device.Adapter
	env := []string{
		EnvDevice + "=" + c.device.Name,
		EnvRequest + "=" + c.request,
		EnvLUID + "=" + a.LUID.String(),
		EnvIndex + "=" + strconv.Itoa(a.Index),
		EnvMemory + "=" + strconv.FormatInt(c.memory, 10),
	}
	if a.Description != "" {
		env = append(env, EnvDescription+"="+a.Description)
	}
	return env
}

// MetadataFile is the host path of the metadata file of a claim's request
// (its base name: firstAvailable alternatives share their request's file)
// in dir.
func MetadataFile(dir, uid, request string) string {
	return filepath.Join(dir, uid, request+".json")
}

// metadataMount is where a container finds the metadata of a claim's
// request (KEP-5304): under the pod's claim name for a claim made from a
// template (the claim's own name is generated), else under the claim's
// name.
func metadataMount(claim *resourceapi.ResourceClaim, request string) string {
	if pod := claim.Annotations[resourceapi.PodResourceClaimAnnotation]; pod != "" {
		return metadata.ResourceClaimTemplateFilePath(DriverName, pod, request)
	}
	return metadata.ResourceClaimFilePath(DriverName, claim.Name, request)
}

// metadataFor is the metadata file of one request of claim, devs its
// devices (at least one) (KEP-5304's format,
// metadata.resource.k8s.io/v1beta1, which
// k8s.io/dynamic-resource-allocation/devicemetadata reads): each device's
// published attributes plus what the claim was given of it. The request
// name recorded is the allocated one, so a pod of a firstAvailable claim
// learns which alternative it got.
func metadataFor(claim *resourceapi.ResourceClaim, devs []claimDevice, s Sharing) ([]byte, error) {
	m := metadatav1beta1.DeviceMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: metadatav1beta1.SchemeGroupVersion.String(), Kind: "DeviceMetadata"},
		ObjectMeta: metav1.ObjectMeta{Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID, Generation: 1},
	}
	if pod := claim.Annotations[resourceapi.PodResourceClaimAnnotation]; pod != "" {
		m.PodClaimName = ptr.To(pod)
	}
	// The allocated name: a firstAvailable alternative says which won.
	r := metadatav1beta1.DeviceMetadataRequest{Name: devs[0].request}
	for _, c := range devs {
		attrs := apiDevice(c.device, s).Attributes
		attrs[AttrMemory] = resourceapi.DeviceAttribute{IntValue: ptr.To(c.memory)}
		if c.shareID != "" {
			attrs[AttrShareID] = resourceapi.DeviceAttribute{StringValue: ptr.To(c.shareID)}
		}
		r.Devices = append(r.Devices, metadatav1beta1.Device{Driver: DriverName, Pool: c.pool, Name: c.device.Name, Attributes: attrs})
	}
	m.Requests = []metadatav1beta1.DeviceMetadataRequest{r}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode device metadata: %w", err)
	}
	return append(data, '\n'), nil
}
