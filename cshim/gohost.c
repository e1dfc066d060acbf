// Is the host process a Go program (issue 13)?
//
// The Go part is a c-shared Go library with a runtime of its own. A process
// that already runs a Go runtime (a Go program that links libibverbs through
// cgo, or one that loaded another Go c-shared library) would get a second
// one: two schedulers, two sets of signal handlers fighting over the same
// signals, two owners of the thread-local g. That does not work reliably, so
// the first open of one of our devices in such a process is refused, and the
// program keeps working with every other provider. Go programs use the
// usb4verbs `provider` package directly instead.
//
// Three signs, cheapest first, each enough on its own:
//  1. a loaded object carries a Go build-ID note (owner "Go" with its NUL,
//     namesz 4, type 4, in a PT_NOTE segment: cmd/link writes it into every
//     ELF it links unless -buildid= is empty), found in memory with
//     dl_iterate_phdr;
//  2. the process exports the cgo runtime's entry points (_cgo_topofstack,
//     _cgo_panic) to the dynamic symbol scope, as every cgo binary does;
//  3. the executable's file has a .go.buildinfo section (every Go build).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <stdlib.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "shim.h"

// ELF_NOTE_GOBUILDID_TAG of cmd/link (go:src/cmd/link/internal/ld/elf.go).
#define GO_NOTE_BUILDID 4

struct go_found {
	const char *own; // the real path of our Go part, or NULL
	char *why;
	size_t len;
	bool found;
	// The Go build ID of our Go part as mapped from its file, if it is:
	// the copies a fork() child loads (golib.c) carry the same one.
	const char *own_id;
	size_t own_id_len;
};

// go_note finds a Go build-ID note in a PT_NOTE segment; its descriptor (the
// build ID) goes to *id, *id_len.
static bool go_note(const char *p, size_t size, const char **id, size_t *id_len)
{
	size_t off = 0;
	while (off + sizeof(ElfW(Nhdr)) <= size) {
		const ElfW(Nhdr) *n = (const void *)(p + off);
		size_t name_off = off + sizeof(*n);
		size_t desc_off = name_off + ((n->n_namesz + 3u) & ~3u);
		size_t next = desc_off + ((n->n_descsz + 3u) & ~3u);
		if (next > size || next <= off)
			return false; // malformed: stop, never read past the segment
		if (n->n_type == GO_NOTE_BUILDID && (n->n_namesz == 3 || n->n_namesz == 4) &&
		    memcmp(p + name_off, "Go\0", 3) == 0) {
			*id = p + desc_off;
			*id_len = n->n_descsz;
			return true;
		}
		off = next;
	}
	return false;
}

// is_own_go_part: file is our Go part (preloaded: its runtime is the one
// load will use, not a second one).
static bool is_own_go_part(const char *own, const char *file)
{
	char real[PATH_MAX];
	return own && file && file[0] && realpath(file, real) && strcmp(real, own) == 0;
}

// object_go_id: the Go build ID of a loaded object, if it has one.
static bool object_go_id(const struct dl_phdr_info *info, const char **id, size_t *id_len)
{
	for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_NOTE && ph->p_memsz >= sizeof(ElfW(Nhdr)) &&
		    go_note((const char *)(info->dlpi_addr + ph->p_vaddr), ph->p_memsz, id, id_len))
			return true;
	}
	return false;
}

// The note is looked for first: it is read from memory, while realpath()
// costs a readlink per element of the object's path (issue 34: ~250 system
// calls in a first open, for the thirty-odd objects of a C program, none of
// them Go).
static int find_own_note(struct dl_phdr_info *info, size_t size, void *data)
{
	struct go_found *f = data;
	const char *id;
	size_t id_len;
	(void)size;
	if (!object_go_id(info, &id, &id_len) || !is_own_go_part(f->own, info->dlpi_name))
		return 0;
	f->own_id = id;
	f->own_id_len = id_len;
	return 1;
}

static int find_go_note(struct dl_phdr_info *info, size_t size, void *data)
{
	struct go_found *f = data;
	const char *id;
	size_t id_len;
	(void)size;
	if (!object_go_id(info, &id, &id_len) || is_own_go_part(f->own, info->dlpi_name))
		return 0;
	// An earlier copy of our own Go part (a fork() child's: golib.c),
	// mapped from a memfd, has our file's build ID.
	if (f->own_id && id_len == f->own_id_len && memcmp(id, f->own_id, id_len) == 0)
		return 0;
	const char *name = info->dlpi_name && info->dlpi_name[0] ? info->dlpi_name : "the program";
	snprintf(f->why, f->len, "%s has a Go build ID", name);
	f->found = true;
	return 1;
}

// exe_has_section reports whether /proc/self/exe has a section of that name.
// Reads only headers, with every offset and count bounded by the file: the
// section header table and the section names in one read each (a read per
// header and per name cost ~70 system calls in every first open, issue 34).
static bool exe_has_section(const char *want)
{
	bool found = false;
	ElfW(Shdr) *sh = NULL;
	char *names = NULL;
	int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ElfW(Ehdr) eh;
	if (pread(fd, &eh, sizeof(eh), 0) != (ssize_t)sizeof(eh) || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
	    eh.e_shentsize != sizeof(ElfW(Shdr)) || eh.e_shnum == 0 || eh.e_shnum > 4096 ||
	    eh.e_shstrndx >= eh.e_shnum)
		goto out;
	size_t table = (size_t)eh.e_shnum * sizeof(*sh);
	if (!(sh = malloc(table)) || pread(fd, sh, table, (off_t)eh.e_shoff) != (ssize_t)table)
		goto out;
	const ElfW(Shdr) *strtab = &sh[eh.e_shstrndx];
	size_t wantlen = strlen(want) + 1;
	if (strtab->sh_size == 0 || strtab->sh_size > (1u << 20) || !(names = malloc(strtab->sh_size)) ||
	    pread(fd, names, strtab->sh_size, (off_t)strtab->sh_offset) != (ssize_t)strtab->sh_size)
		goto out;
	for (ElfW(Half) i = 0; i < eh.e_shnum && !found; i++)
		if (sh[i].sh_name < strtab->sh_size && strtab->sh_size - sh[i].sh_name >= wantlen &&
		    memcmp(names + sh[i].sh_name, want, wantlen) == 0)
			found = true;
out:
	free(sh);
	free(names);
	close(fd);
	return found;
}

bool usb4_host_runs_go(const char *own_go_part, char *why, size_t len)
{
	char own_real[PATH_MAX];
	if (own_go_part && realpath(own_go_part, own_real))
		own_go_part = own_real; // the Go part may itself be a link
	struct go_found f = {.own = own_go_part, .why = why, .len = len};
	dl_iterate_phdr(find_own_note, &f);
	dl_iterate_phdr(find_go_note, &f);
	if (f.found)
		return true;
	static const char *const cgo_syms[] = {"_cgo_topofstack", "_cgo_panic"};
	for (size_t i = 0; i < sizeof(cgo_syms) / sizeof(cgo_syms[0]); i++) {
		void *sym = dlsym(RTLD_DEFAULT, cgo_syms[i]);
		Dl_info info;
		if (sym && !(dladdr(sym, &info) && is_own_go_part(own_go_part, info.dli_fname))) {
			snprintf(why, len, "the process exports Go's %s", cgo_syms[i]);
			return true;
		}
	}
	if (exe_has_section(".go.buildinfo")) {
		snprintf(why, len, "the program has a .go.buildinfo section");
		return true;
	}
	return false;
}
