/* rocprobe does what ROCm's HSA runtime does on WSL before it touches a GPU
 * (ROCR ThunkLoader): with HSA_ENABLE_DXG_DETECTION=1 and an openable
 * /dev/dxg it dlopens librocdxg by bare name, librocdxg.so.1 (ROCm 7.2+)
 * then librocdxg.so (ROCm 7.1), and calls hsaKmtOpenKFD. It prints one line
 * per step and the dids.conf entry the fixture's librocdxg found.
 *
 * Exit: 0 all steps passed; 2 HSA_ENABLE_DXG_DETECTION is not 1 (the
 * runtime would not even try); 4 librocdxg does not load; 5 it lacks
 * hsaKmtOpenKFD; 6 hsaKmtOpenKFD failed (no /dev/dxg). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(void) {
	const char *e = getenv("HSA_ENABLE_DXG_DETECTION");
	if (!e || strcmp(e, "1") != 0) {
		printf("rocprobe: HSA_ENABLE_DXG_DETECTION is %s: the HSA runtime would not load librocdxg\n", e ? e : "unset");
		return 2;
	}
	printf("rocprobe: HSA_ENABLE_DXG_DETECTION=1\n");
	int fd = open("/dev/dxg", O_RDWR | O_CLOEXEC);
	printf("rocprobe: open /dev/dxg: %s\n", fd >= 0 ? "ok" : "failed");
	if (fd >= 0)
		close(fd);

	const char *names[] = {"librocdxg.so.1", "librocdxg.so"};
	void *h = NULL;
	const char *name = NULL;
	for (int i = 0; i < 2 && !h; i++) {
		name = names[i];
		h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
		if (!h)
			printf("rocprobe: dlopen %s: %s\n", name, dlerror());
	}
	if (!h) {
		printf("rocprobe: Cannot load librocdxg.so\n");
		return 4;
	}
	struct link_map *lm = NULL;
	dlinfo(h, RTLD_DI_LINKMAP, &lm);
	printf("rocprobe: loaded %s from %s\n", name, lm && lm->l_name ? lm->l_name : "?");

	int (*open_kfd)(void) = (int (*)(void))dlsym(h, "hsaKmtOpenKFD");
	if (!open_kfd) {
		printf("rocprobe: no hsaKmtOpenKFD: %s\n", dlerror());
		return 5;
	}
	const char *(*dids)(void) = (const char *(*)(void))dlsym(h, "rocdxg_fixture_dids");
	if (dids) {
		const char *d = dids();
		printf("rocprobe: dids.conf: %s\n", d ? d : "(not found)");
	}
	int rc = open_kfd();
	printf("rocprobe: hsaKmtOpenKFD() = %d\n", rc);
	return rc == 0 ? 0 : 6;
}
