// tsanload.c: dlopens the Go part (argv[1]) in a ThreadSanitizer process and waits a
// second while the runtime starts its threads. The Go part's pthread_create wrapper
// (gopart/forkguard.c) must reach the sanitizer's interceptor, or the first runtime
// thread crashes inside the sanitizer. Prints "ok" and exits 0 when it did not.
#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "dlopen: %s\n", dlerror());
		return 2;
	}
	sleep(1);
	puts("ok");
	return 0;
}
