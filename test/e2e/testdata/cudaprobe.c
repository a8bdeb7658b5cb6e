/* cudaprobe: what a CUDA program does first, and nothing else.
 * dlopen("libcuda.so.1") with no LD_LIBRARY_PATH, so only the container's
 * loader cache can find it, then cuInit(0) and, when the library has it,
 * cuDeviceGetCount. Exit 0 only if cuInit returned 0 (CUDA_SUCCESS). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>

int main(void) {
	const char *llp = getenv("LD_LIBRARY_PATH");
	if (llp) {
		printf("cudaprobe: LD_LIBRARY_PATH=%s is set: the probe must run without it\n", llp);
		return 2;
	}
	void *h = dlopen("libcuda.so.1", RTLD_NOW);
	if (!h) {
		printf("cudaprobe: dlopen: %s\n", dlerror());
		return 1;
	}
	struct link_map *lm = NULL;
	if (dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm)
		printf("cudaprobe: loaded %s\n", lm->l_name);
	int (*cuInit)(unsigned) = (int (*)(unsigned))dlsym(h, "cuInit");
	if (!cuInit) {
		printf("cudaprobe: dlsym cuInit: %s\n", dlerror());
		return 1;
	}
	int rc = cuInit(0);
	printf("cudaprobe: cuInit(0) = %d\n", rc);
	if (rc != 0)
		return 1;
	int (*count)(int *) = (int (*)(int *))dlsym(h, "cuDeviceGetCount");
	if (count) {
		int n = -1;
		int crc = count(&n);
		printf("cudaprobe: cuDeviceGetCount = %d (rc %d)\n", n, crc);
	}
	return 0;
}
