package engines

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moby/sys/mountinfo"
)

// TestDockerRuntimeAndGPUs: `docker run --runtime wsl-gpu --gpus all` runs
// the hook twice for one container (the wrapper's prestart hook and
// Docker's nvidia-container-runtime-hook). The second finds the GPU given
// and changes nothing: every WSL path is mounted once, and the GPU works.
func TestDockerRuntimeAndGPUs(t *testing.T) {
	e := setup(t)
	docker, _, stop := startDocker(t, e)
	defer stop()
	logPath := filepath.Join(e.dir, "hook.log")
	before, _ := os.ReadFile(logPath)
	out, err := docker("run", "--rm", "--network", "none", "--runtime", "wsl-gpu", "--gpus", "all",
		"wslgpu-test", "sh", "-c", inside+"\necho ==mountinfo\ncat /proc/self/mountinfo")
	if err != nil {
		log, _ := os.ReadFile(logPath)
		t.Fatalf("docker run: %v\n%s\nhook log tail:\n%s", err, out, tail(string(log), 15))
	}
	checkGPU(t, out, true, e.intel, e.nvidia)
	_, mi, _ := strings.Cut(out, "==mountinfo\n")
	wsl, err := mountinfo.GetMountsFromReader(strings.NewReader(mi), func(m *mountinfo.Info) (skip, stop bool) {
		return !strings.HasPrefix(m.Mountpoint, "/usr/lib/wsl/") && m.Mountpoint != "/dev/dxg", false
	})
	if err != nil {
		t.Fatalf("the container's mountinfo: %v\n%s", err, mi)
	}
	counts := map[string]int{}
	for _, m := range wsl {
		counts[m.Mountpoint]++
	}
	if len(counts) == 0 {
		t.Fatalf("no WSL mount in the container's mountinfo:\n%s", mi)
	}
	for p, n := range counts {
		if n != 1 {
			t.Errorf("%s is mounted %d times", p, n)
		}
	}
	// Both hooks ran: the second one's log says it kept what the first did.
	after, _ := os.ReadFile(logPath)
	if added := string(after[len(before):]); !strings.Contains(added, "already") {
		t.Errorf("the hook log shows no second run finding the GPU given:\n%s", tail(added, 20))
	}
}
