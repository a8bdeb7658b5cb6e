package emulated

import (
	"os"
	"runtime"
	"testing"
)

// An amd64 build here runs natively: the probe reaches the kernel. Under
// make test-arm64, which names its emulator in WSL_GPU_HOOK_TEST_EMULATOR,
// the probe must see the refusal, or the tests it guards would fail there
// instead of skipping.
func TestReason(t *testing.T) {
	r := Reason()
	if emu := os.Getenv("WSL_GPU_HOOK_TEST_EMULATOR"); emu != "" {
		if r == "" {
			t.Errorf("%s runs this test, but the dxg ioctl probe reached the kernel", emu)
		}
		return
	}
	if r != "" && runtime.GOARCH == "amd64" {
		t.Errorf("an amd64 build reports emulation: %s", r)
	}
}
