package driver

import (
	"context"
	"fmt"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
)

// BenchmarkPrepare is the driver's own part of a pod's start, the
// "driver's own prepare" stage of test/k8s's claim-to-running benchmark
// without the host's ioctls (the host list here is a copy): plan, the
// checkpoint, the claim's spec and metadata files written and synced,
// then the unprepare that removes them.
func BenchmarkPrepare(b *testing.B) {
	e := newEnv(b)
	d := e.driver(b)
	ctx := context.Background()
	for i := range b.N {
		uid := fmt.Sprintf("0a0b0c0d-0000-4000-8000-%012d", i)
		c := shareClaim(uid, "bench", nvDev, fmt.Sprintf("5e5e5e5e-0000-4000-8000-%012d", i), "1Gi")
		res, err := d.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{c})
		if err != nil || res[c.UID].Err != nil {
			b.Fatal(err, res[c.UID].Err)
		}
		if _, err := d.UnprepareResourceClaims(ctx, []kubeletplugin.NamespacedObject{{UID: types.UID(uid)}}); err != nil {
			b.Fatal(err)
		}
	}
}
