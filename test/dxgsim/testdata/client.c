/* A raw dxg client for dxgsim's tests, independent of pkg/dxcore.
 * usage: client DEVICE MODE
 *   ok        count query, fill with capacity 64, close every handle
 *   leak      same, but never CLOSEADAPTER
 *   small     fill with capacity 1 (misuse when there are more adapters)
 *   enum2     ENUMADAPTERS2 count and fill, close
 *   overflow  ENUMADAPTERS2 fill with capacity count-1: expect EOVERFLOW
 *   toobig    ENUMADAPTERS2 fill with capacity 65: expect EINVAL
 *   badclose  CLOSEADAPTER of a handle never opened: expect EINVAL
 * Prints one line per adapter: "LUID handle" and exits 0 on the expected result. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

struct adapterinfo { uint32_t handle, luid_lo, luid_hi, sources, precise; };
struct enum2 { uint32_t num, reserved; uint64_t adapters; };
struct enum3 { uint64_t filter; uint32_t count, reserved; uint64_t adapters; };

#define ENUM2 0xC0104714u
#define ENUM3 0xC018473Eu
#define CLOSE 0xC0044715u

int main(int argc, char **argv) {
	if (argc != 3) return 2;
	int fd = open(argv[1], O_RDONLY | O_CLOEXEC);
	if (fd < 0) { printf("open: %s\n", strerror(errno)); return 1; }
	const char *m = argv[2];
	struct adapterinfo a[65];
	memset(a, 0, sizeof a);
	uint32_t n = 0;
	if (!strcmp(m, "badclose")) {
		uint32_t h = 0x7ffffff0;
		int r = ioctl(fd, CLOSE, &h);
		printf("close: %d %s\n", r, r ? strerror(errno) : "ok");
		return r == -1 && errno == EINVAL ? 0 : 1;
	}
	if (!strncmp(m, "enum2", 5) || !strcmp(m, "overflow") || !strcmp(m, "toobig")) {
		struct enum2 e = {0};
		if (ioctl(fd, ENUM2, &e)) { printf("count: %s\n", strerror(errno)); return 1; }
		uint32_t count = e.num;
		e.adapters = (uintptr_t)a;
		e.num = !strcmp(m, "overflow") ? count - 1 : !strcmp(m, "toobig") ? 65 : count;
		int r = ioctl(fd, ENUM2, &e);
		if (!strcmp(m, "overflow")) { printf("fill: %s num=%u\n", r ? strerror(errno) : "ok", e.num); return r == -1 && errno == EOVERFLOW && e.num == count - 1 ? 0 : 1; }
		if (!strcmp(m, "toobig")) { printf("fill: %s\n", r ? strerror(errno) : "ok"); return r == -1 && errno == EINVAL ? 0 : 1; }
		if (r) { printf("fill: %s\n", strerror(errno)); return 1; }
		n = e.num;
	} else {
		struct enum3 e = {.filter = 1};
		if (ioctl(fd, ENUM3, &e)) { printf("count: %s\n", strerror(errno)); return 1; }
		e.adapters = (uintptr_t)a;
		e.count = !strcmp(m, "small") ? 1 : 64;
		if (ioctl(fd, ENUM3, &e)) { printf("fill: %s\n", strerror(errno)); return 1; }
		n = e.count;
	}
	for (uint32_t i = 0; i < n; i++) printf("0x%x 0x%x\n", a[i].luid_lo, a[i].handle);
	if (strcmp(m, "leak"))
		for (uint32_t i = 0; i < n; i++)
			if (ioctl(fd, CLOSE, &a[i].handle)) { printf("close: %s\n", strerror(errno)); return 1; }
	return 0;
}
