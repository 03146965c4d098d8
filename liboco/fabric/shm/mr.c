/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * mr.c -- memory registration of the shm provider. A region with remote
 * access must lie in memory a peer can map: a shared mapping of a file
 * (memfd, /dev/shm) that an fd of this process names is shared as it is;
 * private anonymous memory (the core's arenas, malloc, mmap) is adopted:
 * the 2 MiB-aligned window of its mapping around it (SHM_ADOPT_ALIGN: a
 * chunk of the core's arenas) is copied into a new memfd mapped over it at the same address, so the
 * caller's pointers stay valid. Each such memfd is an arena, sent to every
 * peer (ARENA message) before the region's key is published in the fab
 * page, where peers check key, bounds and rights. Regions with local
 * access only just enter the key table.
 */
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "../../log.h"
#include "shm.h"

#define REMOTE (FAB_ACCESS_REMOTE_READ | FAB_ACCESS_REMOTE_WRITE | FAB_ACCESS_REMOTE_ATOMIC)

struct shm_mr {
	struct fab_mr base;
	int published;
	uint32_t slot; /* of the published entry */
};

struct vma {
	uintptr_t start, end;
	char perms[5];
	unsigned long long off;
	dev_t dev;
	unsigned long ino;
	char path[64];
	int hugepage; /* VmFlags hg: madvise(MADV_HUGEPAGE), as the core's arena chunks */
};

/*
 * vma_find -- the mapping holding [@ps, @pe) (page aligned), from
 * /proc/self/smaps (its VmFlags say whether it was advised for huge
 * pages: the core's arena chunks are).
 */
static int vma_find(uintptr_t ps, uintptr_t pe, struct vma *out)
{
	FILE *fp = fopen("/proc/self/smaps", "re");
	char line[512];
	int ret = -EINVAL, found = 0;

	if (fp == NULL)
		return -errno;
	while (fgets(line, sizeof(line), fp) != NULL) {
		unsigned long s, e;
		unsigned maj, min;
		int pos = 0;
		struct vma v = {0};

		if (found) {
			if (strncmp(line, "VmFlags:", 8) != 0)
				continue;
			out->hugepage = strstr(line, " hg") != NULL;
			break;
		}
		if (sscanf(line, "%lx-%lx %4s %llx %x:%x %lu %n", &s, &e, v.perms, &v.off, &maj,
		           &min, &v.ino, &pos) < 7)
			continue;
		if (ps < s || ps >= e)
			continue;
		if (pe > e)
			break; /* the region spans mappings */
		v.start = s;
		v.end = e;
		v.dev = makedev(maj, min);
		if (pos > 0) {
			snprintf(v.path, sizeof(v.path), "%s", line + pos);
			v.path[strcspn(v.path, "\n")] = '\0';
		}
		*out = v;
		ret = 0;
		found = 1;
	}
	fclose(fp);
	return ret;
}

/* fd_of -- an fd of this process on the file (@dev, @ino), duplicated; -1 when none. */
static int fd_of(const struct vma *v)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	char path[96];
	int fd = -1;

	while (d != NULL && (de = readdir(d)) != NULL && fd < 0) {
		struct stat st;
		int x = atoi(de->d_name);

		if (de->d_name[0] < '0' || de->d_name[0] > '9' || x == dirfd(d))
			continue;
		if (fstat(x, &st) == 0 && st.st_dev == v->dev && st.st_ino == v->ino &&
		    (fcntl(x, F_GETFL) & O_ACCMODE) == O_RDWR)
			fd = fcntl(x, F_DUPFD_CLOEXEC, 0);
	}
	if (d != NULL)
		closedir(d);
	if (fd >= 0)
		return fd;
	/* with CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE the mapping itself names it */
	snprintf(path, sizeof(path), "/proc/self/map_files/%lx-%lx", (unsigned long)v->start,
	         (unsigned long)v->end);
	return open(path, O_RDWR | O_CLOEXEC);
}

/*
 * copy_words -- copy pages word by word, not instrumented: the pages of a
 * region registered from malloc() may hold a sanitizer's redzones, which
 * the new mapping must keep as they are.
 */
__attribute__((no_sanitize("address"))) static void copy_words(void *dst, const void *src,
                                                               size_t len)
{
	volatile uint64_t *d = dst;
	const volatile uint64_t *x = src;

	for (size_t i = 0; i < len / 8; i++)
		d[i] = x[i];
}

/* adopt -- copy [@s, @e) into a new memfd mapped over it at the same address. The fd or -errno. */
static int adopt(uintptr_t s, uintptr_t e)
{
	size_t len = e - s;
	int fd = memfd_create("loco-shm", MFD_CLOEXEC), ret;
	void *tmp, *p;

	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)len) < 0)
		goto err;
	tmp = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (tmp == MAP_FAILED)
		goto err;
	copy_words(tmp, (const void *)s, len);
	munmap(tmp, len);
	p = mmap((void *)s, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0);
	if (p == MAP_FAILED)
		goto err; /* the old mapping is still there */
	return fd;
err:
	ret = -errno;
	close(fd);
	return ret;
}

/*
 * arena_for -- under fab->lock: the arena holding [@addr, @addr + @len),
 * made if need be. For a region with local access only (@remote 0) only
 * the core's arena chunks are adopted, at their first region (so that no
 * thread writes them while they are copied); 1 when it was not.
 */
static int arena_for(struct shm_fab *f, uintptr_t addr, size_t len, int remote, uint32_t *id,
                     uint64_t *off)
{
	uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t ps = addr & ~(pg - 1), pe = (addr + len + pg - 1) & ~(pg - 1);
	struct shm_arena a = {.fd = -1};
	struct stat st;
	struct vma v;
	int ret = vma_find(ps, pe, &v);

	if (!remote && (ret || !v.hugepage || v.perms[3] != 'p' || v.ino != 0))
		return 1; /* nothing to share; it stays as it is */
	if (ret) {
		lc_log_err("shm: cannot register %p+%zu: not inside one mapping", (void *)addr,
		           len);
		return ret;
	}
	if (v.perms[0] != 'r' || v.perms[1] != 'w') {
		lc_log_err("shm: cannot register %p+%zu: not read-write memory", (void *)addr, len);
		return -EINVAL;
	}
	if (v.perms[3] == 's' && v.ino != 0) {
		for (unsigned i = 0; i < f->narenas; i++) {
			if (f->arenas[i].dev != v.dev || f->arenas[i].ino != v.ino)
				continue;
			if (fstat(f->arenas[i].fd, &st) == 0 &&
			    (uint64_t)st.st_size > f->arenas[i].size)
				f->arenas[i].size =
				    (uint64_t)st.st_size; /* its peers map the old size */
			*id = i;
			*off = v.off + (addr - v.start);
			return 0;
		}
		a.fd = fd_of(&v);
		if (a.fd < 0) {
			lc_log_err(
			    "shm: cannot register %p+%zu: a shared mapping no fd of ours names "
			    "(use a memfd and keep its fd open)",
			    (void *)addr, len);
			return -EINVAL;
		}
		*off = v.off + (addr - v.start);
	} else if (v.perms[3] == 'p' && v.ino == 0 && strcmp(v.path, "[stack]") != 0 &&
	           strcmp(v.path, "[vvar]") != 0 && strcmp(v.path, "[vdso]") != 0) {
		/*
		 * A mapping that fits the 2 MiB-aligned window around the region
		 * (a chunk of the core's arenas, a test's mmap) is adopted whole,
		 * so that its other regions share the arena; chunks of the core
		 * merged into one mapping (advised for huge pages) one chunk; in
		 * any other larger mapping (merged with neighbours: malloc's, a
		 * sanitizer's) only the region's own pages, never memory that is
		 * not the caller's.
		 */
		uintptr_t s = ps & ~(uintptr_t)(SHM_ADOPT_ALIGN - 1);
		uintptr_t e = (pe + SHM_ADOPT_ALIGN - 1) & ~(uintptr_t)(SHM_ADOPT_ALIGN - 1);

		if (v.start >= s && v.end <= e) {
			s = v.start;
			e = v.end;
		} else if (v.hugepage) {
			/* chunks of the core's arenas merged into one mapping: one chunk */
			s = s < v.start ? v.start : s;
			e = e > v.end ? v.end : e;
		} else {
			s = ps;
			e = pe;
		}
		a.fd = adopt(s, e);
		if (a.fd < 0) {
			lc_log_err("shm: cannot adopt %p+%zu into a memfd: %s", (void *)s, e - s,
			           strerror(-a.fd));
			return a.fd;
		}
		*off = addr - s;
	} else {
		lc_log_err("shm: cannot register %p+%zu: a private file mapping", (void *)addr,
		           len);
		return -EINVAL;
	}
	if (f->narenas == SHM_MAX_ARENAS || fstat(a.fd, &st) < 0) {
		close(a.fd);
		return -ENOSPC;
	}
	a.dev = st.st_dev;
	a.ino = st.st_ino;
	a.size = (uint64_t)st.st_size;
	if (*off + len > a.size) {
		close(a.fd);
		return -EINVAL;
	}
	*id = f->narenas;
	f->arenas[f->narenas++] = a;
	/*
	 * Every peer hears of the arena before any key in it is published. A
	 * peer we cannot tell (its socket full for 1 s, or gone) would take
	 * our keys in it for bad ones: its link goes down now, saying why.
	 */
	for (unsigned i = 0; i < f->nlinks; i++) {
		struct shm_link *l = f->links[i];
		int err;

		if (!l->announced || __atomic_load_n(&l->state, __ATOMIC_ACQUIRE) == SHM_LINK_DOWN)
			continue;
		err = shm_send_arena(l, *id);
		if (err)
			shm_link_fail(l, -ECONNRESET, -ECONNRESET,
			              err == -ECONNRESET ? NULL : "cannot send it a new arena");
	}
	return 0;
}

static void pub_fill(struct shm_kent *e, uint32_t key, unsigned access, uint32_t arena,
                     uint64_t base, uint64_t len, uint64_t off)
{
	uint32_t seq = __atomic_load_n(&e->seq, __ATOMIC_RELAXED);

	if (seq & 1)
		seq++;
	__atomic_store_n(&e->seq, seq, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE); /* pairs with remote_ptr()'s acquire fence */
	__atomic_store_n(&e->key, key, __ATOMIC_RELAXED);
	__atomic_store_n(&e->access, access, __ATOMIC_RELAXED);
	__atomic_store_n(&e->arena, arena, __ATOMIC_RELAXED);
	__atomic_store_n(&e->base, base, __ATOMIC_RELAXED);
	__atomic_store_n(&e->len, len, __ATOMIC_RELAXED);
	__atomic_store_n(&e->off, off, __ATOMIC_RELAXED);
	__atomic_store_n(&e->seq, seq + 1, __ATOMIC_RELEASE);
}

/*
 * free_slot -- under fab->lock: the published entry for @rkey: its own
 * slot (always free when this fab chose the key: one region per slot), or
 * the first free one of the SHM_PROBE - 1 after it (keys given). -ENOSPC.
 */
static int free_slot(struct shm_fab *f, uint32_t rkey, uint32_t *slot)
{
	for (unsigned p = 0; p < SHM_PROBE; p++) {
		uint32_t s = (rkey + p) & (SHM_KEYS - 1);

		if (!(__atomic_load_n(&f->fpage->ent[s].seq, __ATOMIC_RELAXED) & 1)) {
			*slot = s;
			return 0;
		}
	}
	return -ENOSPC;
}

/* reg -- a region under keys this fab chooses (@given NULL), or @given[0] (lkey), [1] (rkey). */
static int reg(struct fab *fab, void *addr, size_t len, unsigned access, const uint32_t *given,
               struct fab_mr **out)
{
	struct shm_fab *f = to_shm_fab(fab);
	struct shm_mr *m;
	uint32_t lkey = given ? given[0] : 0, rkey = given ? given[1] : 0, arena = 0;
	uint64_t off = 0;
	int ret = 0;

	if (fab_mr_check(addr, len, access, out))
		return -EINVAL;
	m = calloc(1, sizeof(*m));
	if (m == NULL)
		return -ENOMEM;
	pthread_mutex_lock(&f->lock);
	ret = arena_for(f, (uintptr_t)addr, len, (access & REMOTE) != 0, &arena, &off);
	if (ret == 1)
		ret = 0; /* local access only, in memory left as it is */
	if (ret == 0 && given != NULL) {
		ret = keytab_add_foreign(&f->kt, lkey, addr, len, access);
	} else if (ret == 0) {
		ret = keytab_add(&f->kt, addr, len, access, &lkey);
		rkey = lkey;
	}
	if (ret == 0 && (access & REMOTE)) {
		ret = free_slot(f, rkey, &m->slot);
		if (ret == 0) {
			pub_fill(&f->fpage->ent[m->slot], rkey, access, arena,
			         (uint64_t)(uintptr_t)addr, len, off);
			m->published = 1;
		} else {
			keytab_remove(&f->kt, lkey);
		}
	}
	pthread_mutex_unlock(&f->lock);
	if (ret) {
		free(m);
		return ret;
	}
	m->base = (struct fab_mr){
	    .fab = fab, .addr = addr, .len = len, .lkey = lkey, .rkey = rkey, .access = access};
	*out = &m->base;
	return 0;
}

int shm_mr_reg(struct fab *fab, void *addr, size_t len, unsigned access, struct fab_mr **out)
{
	return reg(fab, addr, len, access, NULL, out);
}

int shm_mr_reg_key(struct fab *fab, void *addr, size_t len, unsigned access, uint32_t lkey,
                   uint32_t rkey, struct fab_mr **out)
{
	const uint32_t keys[2] = {lkey, rkey};

	return reg(fab, addr, len, access, keys, out);
}

int shm_mr_dereg(struct fab_mr *mr)
{
	struct shm_fab *f = to_shm_fab(mr->fab);
	struct shm_mr *m = container_of(mr, struct shm_mr, base);
	int ret;

	pthread_mutex_lock(&f->lock);
	ret = keytab_remove(&f->kt, mr->lkey);
	if (m->published) {
		struct shm_kent *e = &f->fpage->ent[m->slot];

		__atomic_store_n(&e->seq, e->seq + 1, __ATOMIC_RELEASE); /* even: removed */
	}
	/*
	 * Wait out every peer's access that may have checked the key before:
	 * the removal, then each peer's busy word (odd while it accesses us),
	 * against its increment, then its key load.
	 */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	for (unsigned i = 0; m->published && i < f->nlinks; i++) {
		struct shm_link *l = f->links[i];
		uint64_t b;

		if (l->peer == NULL || __atomic_load_n(&l->state, __ATOMIC_ACQUIRE) != SHM_LINK_UP)
			continue;
		b = __atomic_load_n(&l->peer->busy, __ATOMIC_SEQ_CST);
		for (int k = 0; (b & 1) && k < 10000000 &&
		                __atomic_load_n(&l->peer->busy, __ATOMIC_ACQUIRE) == b;
		     k++)
			lc_cpu_relax();
	}
	pthread_mutex_unlock(&f->lock);
	free(m);
	return ret;
}
