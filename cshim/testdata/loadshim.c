// Test program: optionally loads libibverbs.so.1 (whatever LD_LIBRARY_PATH
// finds), then dlopens the shim given as argv[1], as libibverbs would.
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: loadshim SHIM.so with-verbs|without-verbs\n");
		return 2;
	}
	if (strcmp(argv[2], "with-verbs") == 0 && !dlopen("libibverbs.so.1", RTLD_NOW | RTLD_GLOBAL)) {
		fprintf(stderr, "loadshim: %s\n", dlerror());
		return 2;
	}
	if (!dlopen(argv[1], RTLD_NOW)) {
		fprintf(stderr, "loadshim: %s\n", dlerror());
		return 2;
	}
	printf("loaded\n");
	return 0;
}
