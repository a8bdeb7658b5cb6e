/* cudaprobe: what a CUDA application does first. dlopen("libcuda.so.1") with
 * no LD_LIBRARY_PATH (the container's loader cache must know it), then
 * cuInit(0) and cuDeviceGetCount. Exit 0 only if both succeed. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>

int main(void) {
	void *h = dlopen("libcuda.so.1", RTLD_NOW);
	if (!h) {
		fprintf(stderr, "cudaprobe: dlopen libcuda.so.1: %s\n", dlerror());
		return 1;
	}
	Dl_info info;
	int (*cuInit)(unsigned) = (int (*)(unsigned))dlsym(h, "cuInit");
	int (*cuDeviceGetCount)(int *) = (int (*)(int *))dlsym(h, "cuDeviceGetCount");
	if (!cuInit || !cuDeviceGetCount) {
		fprintf(stderr, "cudaprobe: libcuda.so.1 lacks cuInit/cuDeviceGetCount\n");
		return 1;
	}
	if (dladdr((void *)cuInit, &info) && info.dli_fname)
		printf("cudaprobe: loaded %s\n", info.dli_fname);
	int rc = cuInit(0);
	printf("cudaprobe: cuInit(0) = %d\n", rc);
	if (rc != 0)
		return 1;
	int n = -1;
	rc = cuDeviceGetCount(&n);
	printf("cudaprobe: cuDeviceGetCount = %d (rc %d)\n", n, rc);
	return rc == 0 ? 0 : 1;
}
