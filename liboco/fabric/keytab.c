/* SPDX-License-Identifier: BSD-2-Clause */
/* keytab.c -- key -> region table with overflow-safe bounds checks. */
#include <errno.h>
#include <stdlib.h>
#include <sys/random.h>

#include "keytab.h"

#define KEYTAB_TRIES 64 /* reads of an entry being rewritten before it counts as no region */

static int init(struct keytab *kt, uint32_t cap, int foreign)
{
	kt->ent = calloc(cap, sizeof(*kt->ent));
	kt->gen = calloc(cap, sizeof(*kt->gen));
	if (kt->ent == NULL || kt->gen == NULL) {
		free(kt->ent);
		free(kt->gen);
		kt->ent = NULL;
		return -ENOMEM;
	}
	pthread_mutex_init(&kt->lock, NULL);
	kt->cap = cap;
	for (kt->idx_bits = 1; (1u << kt->idx_bits) < cap;)
		kt->idx_bits++;
	kt->next_slot = 0;
	kt->nkeys = 0;
	kt->foreign = foreign;
	return 0;
}

int keytab_init(struct keytab *kt, uint32_t cap)
{
	if (kt == NULL || cap == 0 || cap > KEYTAB_MAX)
		return -EINVAL;
	return init(kt, cap, 0);
}

/* fill_random -- @len random bytes from getrandom() at @buf. 0 or -errno. */
static int fill_random(void *buf, size_t len)
{
	uint8_t *p = buf;

	for (int tries = 0; len > 0 && tries < 64; tries++) {
		ssize_t n = getrandom(p, len, 0);

		if (n < 0 && errno != EINTR)
			return -errno;
		if (n > 0) {
			p += n;
			len -= (size_t)n;
		}
	}
	return len ? -EIO : 0;
}

int keytab_randomize(struct keytab *kt)
{
	uint32_t start;
	int ret;

	if (kt == NULL || kt->ent == NULL || kt->foreign)
		return -EINVAL;
	pthread_mutex_lock(&kt->lock);
	/* keytab_add() takes gen + 1 (masked, never 0): any start is fine */
	ret = fill_random(kt->gen, (size_t)kt->cap * sizeof(*kt->gen));
	if (ret == 0)
		ret = fill_random(&start, sizeof(start));
	if (ret == 0)
		kt->next_slot = start % kt->cap;
	pthread_mutex_unlock(&kt->lock);
	return ret;
}

int keytab_init_foreign(struct keytab *kt, uint32_t cap)
{
	if (kt == NULL || cap < 2 || cap > KEYTAB_MAX || (cap & (cap - 1)) != 0)
		return -EINVAL;
	return init(kt, cap, 1);
}

void keytab_fini(struct keytab *kt)
{
	if (kt == NULL || kt->ent == NULL)
		return;
	pthread_mutex_destroy(&kt->lock);
	free(kt->ent);
	free(kt->gen);
	kt->ent = NULL;
	kt->gen = NULL;
}

/* home -- the slot of @key: its low bits, or where a foreign key's probe run starts. */
static uint32_t home(const struct keytab *kt, uint32_t key)
{
	if (kt->foreign)
		return (key * 2654435761u) & (kt->cap - 1);
	return key & ((1u << kt->idx_bits) - 1);
}

/*
 * ent_read -- copy @e into @out; returns the entry's seq, odd when @out
 * holds a region. Lock-free: an entry rewritten while read is read again,
 * and one rewritten on every try counts as removed (an even seq, not 0).
 */
static uint32_t ent_read(const struct keytab_ent *e, struct keytab_ent *out)
{
	for (int i = 0; i < KEYTAB_TRIES; i++) {
		uint32_t seq = __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE);

		if (!(seq & 1))
			return seq;
		out->key = __atomic_load_n(&e->key, __ATOMIC_RELAXED);
		out->access = __atomic_load_n(&e->access, __ATOMIC_RELAXED);
		out->base = __atomic_load_n(&e->base, __ATOMIC_RELAXED);
		out->len = __atomic_load_n(&e->len, __ATOMIC_RELAXED);
		/*
		 * The slot may have been removed and reused for another region
		 * while we read: then the fields belong to a newer entry. Re-read
		 * seq after them; the fence pairs with the release fence in
		 * ent_fill(), so seeing a newer field implies seeing seq change.
		 */
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&e->seq, __ATOMIC_RELAXED) == seq)
			return seq;
	}
	return 2;
}

/* ent_fill -- under the lock: put a region in the free slot @e. */
static void ent_fill(struct keytab *kt, struct keytab_ent *e, uint32_t key, void *base, size_t len,
                     unsigned access)
{
	uint32_t seq = __atomic_load_n(&e->seq, __ATOMIC_RELAXED);

	/* the field stores come after the slot's removal: pairs with ent_read() */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	__atomic_store_n(&e->key, key, __ATOMIC_RELAXED);
	__atomic_store_n(&e->base, (uintptr_t)base, __ATOMIC_RELAXED);
	__atomic_store_n(&e->len, len, __ATOMIC_RELAXED);
	__atomic_store_n(&e->access, access, __ATOMIC_RELAXED);
	/* odd: in use; pairs with the acquire load of seq in ent_read() */
	__atomic_store_n(&e->seq, seq + 1, __ATOMIC_RELEASE);
	kt->nkeys++;
}

/*
 * lookup_seq -- the slot holding @key, a copy of its entry in @out and
 * the seq it was read under (*@seq_out); -ENOENT when no slot does. A
 * foreign key is searched for from its home slot on, past other keys and
 * removed slots, up to a slot never used.
 */
static int lookup_seq(const struct keytab *kt, uint32_t key, struct keytab_ent *out, uint32_t *slot,
                      uint32_t *seq_out)
{
	uint32_t i = home(kt, key), tries = kt->foreign ? kt->cap : 1;

	if (!kt->foreign && (key == 0 || i >= kt->cap))
		return -ENOENT;
	for (; tries > 0; tries--, i = (i + 1) & (kt->cap - 1)) {
		uint32_t seq = ent_read(&kt->ent[i], out);

		if ((seq & 1) && out->key == key) {
			*slot = i;
			*seq_out = seq;
			return 0;
		}
		if (seq == 0)
			break;
	}
	return -ENOENT;
}

static int lookup(const struct keytab *kt, uint32_t key, struct keytab_ent *out, uint32_t *slot)
{
	uint32_t seq;

	return lookup_seq(kt, key, out, slot, &seq);
}

static int range_ok(const void *base, size_t len)
{
	return base != NULL && len != 0 && (uintptr_t)base + len >= (uintptr_t)base;
}

int keytab_add(struct keytab *kt, void *base, size_t len, unsigned access, uint32_t *key)
{
	uint32_t gen, k;

	if (!range_ok(base, len) || key == NULL || kt->foreign)
		return -EINVAL;
	pthread_mutex_lock(&kt->lock);
	for (uint32_t n = 0; n < kt->cap; n++) {
		uint32_t i = (kt->next_slot + n) % kt->cap;
		struct keytab_ent *e = &kt->ent[i];

		if (__atomic_load_n(&e->seq, __ATOMIC_RELAXED) & 1)
			continue;
		/* the slot's next generation, never 0 so that no key is 0 */
		gen = (kt->gen[i] + 1) & ((1u << (32 - kt->idx_bits)) - 1);
		if (gen == 0)
			gen = 1;
		kt->gen[i] = gen;
		kt->next_slot = (i + 1) % kt->cap;
		k = (gen << kt->idx_bits) | i;
		ent_fill(kt, e, k, base, len, access);
		pthread_mutex_unlock(&kt->lock);
		*key = k;
		return 0;
	}
	pthread_mutex_unlock(&kt->lock);
	return -ENOSPC;
}

int keytab_add_foreign(struct keytab *kt, uint32_t key, void *base, size_t len, unsigned access)
{
	uint32_t mask = kt->cap - 1, i = home(kt, key), free_slot = UINT32_MAX;
	int ret = 0;

	if (!range_ok(base, len) || !kt->foreign)
		return -EINVAL;
	pthread_mutex_lock(&kt->lock);
	if (kt->nkeys >= kt->cap / 2) {
		ret = -ENOSPC;
		goto out;
	}
	/* the first free slot of the probe run; the rest of the run must not hold @key */
	for (uint32_t n = 0; n < kt->cap; n++, i = (i + 1) & mask) {
		const struct keytab_ent *e = &kt->ent[i];
		uint32_t seq = __atomic_load_n(&e->seq, __ATOMIC_RELAXED);

		if (seq & 1) {
			if (e->key == key) {
				ret = -EEXIST;
				goto out;
			}
			continue;
		}
		if (free_slot == UINT32_MAX)
			free_slot = i;
		if (seq == 0)
			break;
	}
	/* at most half the slots are in use: the run has a free one */
	ent_fill(kt, &kt->ent[free_slot], key, base, len, access);
out:
	pthread_mutex_unlock(&kt->lock);
	return ret;
}

int keytab_remove(struct keytab *kt, uint32_t key)
{
	struct keytab_ent cur;
	uint32_t i, seq;
	int ret;

	pthread_mutex_lock(&kt->lock);
	ret = lookup(kt, key, &cur, &i);
	if (ret == 0) {
		/* even: removed; never 0, which ends a foreign key's probe run */
		seq = kt->ent[i].seq + 1;
		__atomic_store_n(&kt->ent[i].seq, seq ? seq : 2, __ATOMIC_RELEASE);
		kt->nkeys--;
	}
	pthread_mutex_unlock(&kt->lock);
	return ret;
}

/* grants -- whether entry @e grants @access to [@addr, @addr + @len) */
static int grants(const struct keytab_ent *e, uint64_t addr, uint64_t len, unsigned access)
{
	/* addr in [base, base + len] and @len <= len - (addr - base), without overflow */
	return (e->access & access) == access && addr >= e->base && addr - e->base <= e->len &&
	       len <= e->len - (addr - e->base);
}

int keytab_check(const struct keytab *kt, uint32_t key, uint64_t addr, uint64_t len,
                 unsigned access, void **ptr)
{
	struct keytab_ent e;
	uint32_t slot;

	if (lookup(kt, key, &e, &slot) != 0 || !grants(&e, addr, len, access))
		return -EACCES;
	*ptr = (void *)(uintptr_t)addr;
	return 0;
}

int keytab_check_last(const struct keytab *kt, struct keytab_last *last, uint32_t key,
                      uint64_t addr, uint64_t len, unsigned access, void **ptr)
{
	/* pairs with ent_fill()'s release: the same odd seq, the same entry as read then */
	if (last->e == NULL || last->c.key != key ||
	    __atomic_load_n(&last->e->seq, __ATOMIC_ACQUIRE) != last->seq) {
		struct keytab_ent e;
		uint32_t slot, seq;

		if (lookup_seq(kt, key, &e, &slot, &seq) != 0)
			return -EACCES;
		last->e = &kt->ent[slot];
		last->seq = seq;
		last->c = e;
	}
	if (!grants(&last->c, addr, len, access))
		return -EACCES;
	*ptr = (void *)(uintptr_t)addr;
	return 0;
}
