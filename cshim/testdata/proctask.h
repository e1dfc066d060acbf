// The test programs' count of this process's threads (/proc/self/task), the
// sign that a Go runtime started; -1 when it cannot be read.
#ifndef USB4_TESTDATA_PROCTASK_H
#define USB4_TESTDATA_PROCTASK_H
#include <dirent.h>

static inline int count_threads(void)
{
	DIR *d = opendir("/proc/self/task");
	int n = 0;
	if (!d)
		return -1;
	for (struct dirent *e; (e = readdir(d));)
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

#endif
