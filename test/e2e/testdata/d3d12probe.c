/* d3d12probe: what Mesa's d3d12 and dzn drivers do first on WSL, and
 * nothing else. dlopen("libdxcore.so") and dlopen("libd3d12.so") with no
 * LD_LIBRARY_PATH, so only the container's loader cache can find them,
 * then look up the entry points Mesa calls (DXCoreCreateAdapterFactory,
 * D3D12CreateDevice), and print MESA_D3D12_DEFAULT_ADAPTER_NAME, the
 * adapter Mesa would pick. Exit 0 only if both load with their symbols. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>

static int load(const char *name, const char *sym) {
	void *h = dlopen(name, RTLD_NOW);
	if (!h) {
		printf("d3d12probe: dlopen: %s\n", dlerror());
		return 1;
	}
	struct link_map *lm = NULL;
	if (dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm)
		printf("d3d12probe: loaded %s\n", lm->l_name);
	if (!dlsym(h, sym)) {
		printf("d3d12probe: dlsym %s: %s\n", sym, dlerror());
		return 1;
	}
	printf("d3d12probe: %s found\n", sym);
	return 0;
}

int main(void) {
	const char *llp = getenv("LD_LIBRARY_PATH");
	if (llp) {
		printf("d3d12probe: LD_LIBRARY_PATH=%s is set: the probe must run without it\n", llp);
		return 2;
	}
	int rc = load("libdxcore.so", "DXCoreCreateAdapterFactory") | load("libd3d12.so", "D3D12CreateDevice");
	const char *name = getenv("MESA_D3D12_DEFAULT_ADAPTER_NAME");
	printf("d3d12probe: Mesa's adapter: %s\n", name ? name : "(its default)");
	return rc;
}
