/* fsprobe: one file system call, reported as a user would read it.
 *   fsprobe open-rw PATH   open(PATH, O_RDWR)           (a device node)
 *   fsprobe create PATH    open(PATH, O_CREAT|O_WRONLY)  (is it writable?)
 * Prints "OP PATH: ok" or "OP PATH: ERRNAME (message)" and exits 0 or 1.
 * Built static so it runs in images without a C library. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
	if (argc != 3) {
		fprintf(stderr, "usage: fsprobe open-rw|create PATH\n");
		return 2;
	}
	int fd;
	if (strcmp(argv[1], "open-rw") == 0)
		fd = open(argv[2], O_RDWR | O_CLOEXEC);
	else if (strcmp(argv[1], "create") == 0)
		fd = open(argv[2], O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	else {
		fprintf(stderr, "fsprobe: unknown operation %s\n", argv[1]);
		return 2;
	}
	if (fd < 0) {
		int e = errno;
		printf("%s %s: %s (%s)\n", argv[1], argv[2], strerrorname_np(e), strerror(e));
		return 1;
	}
	printf("%s %s: ok\n", argv[1], argv[2]);
	close(fd);
	if (strcmp(argv[1], "create") == 0)
		unlink(argv[2]);
	return 0;
}
