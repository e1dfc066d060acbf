// Test library (issue 31 item 2, TestGoPartStaticTLSAdvice): uses up glibc's
// static TLS surplus, as a big process's earlier dlopens of initial-exec TLS
// libraries do, so the Go part's late dlopen fails for want of static TLS.
//   -DHOG_BYTES=N -shared        a library with N bytes of initial-exec TLS
//   -DHOG_LOADER -shared         preloaded: its constructor dlopens
//                                $TLSHOG_FRONT (the front, which needs 2
//                                bytes), then $TLSHOG_DIR/hog64-<k>.so and
//                                hog1-<k>.so, k = 0, 1, ... until one fails
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#ifdef HOG_BYTES
__thread char tlshog[HOG_BYTES] __attribute__((tls_model("initial-exec")));
char *tlshog_addr(void)
{
	return tlshog;
}
#endif

#ifdef HOG_LOADER
static void fill(const char *dir, const char *kind)
{
	char path[4096];
	for (int k = 0; k < 4096; k++) {
		snprintf(path, sizeof(path), "%s/%s-%d.so", dir, kind, k);
		if (!dlopen(path, RTLD_NOW | RTLD_LOCAL))
			return;
	}
}

__attribute__((constructor)) static void hog_static_tls(void)
{
	const char *front = getenv("TLSHOG_FRONT"), *dir = getenv("TLSHOG_DIR");
	if (!front || !dir || !dlopen(front, RTLD_NOW | RTLD_GLOBAL)) {
		fprintf(stderr, "tlshog: cannot load the front: %s\n", dlerror());
		return;
	}
	fill(dir, "hog64");
	fill(dir, "hog1");
}
#endif
