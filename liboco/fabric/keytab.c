/* SPDX-License-Identifier: BSD-2-Clause */
/* keytab.c -- key -> region table with overflow-safe bounds checks. */
#include <errno.h>
#include <stdlib.h>

#include "keytab.h"

int keytab_init(struct keytab *kt, uint32_t cap)
{
	if (kt == NULL || cap == 0 || cap > KEYTAB_MAX)
		return -EINVAL;
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
	return 0;
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

int keytab_add(struct keytab *kt, void *base, size_t len, unsigned access, uint32_t *key)
{
	uint32_t gen, k;

	if (base == NULL || len == 0 || key == NULL || (uintptr_t)base + len < (uintptr_t)base)
		return -EINVAL;
	pthread_mutex_lock(&kt->lock);
	for (uint32_t n = 0; n < kt->cap; n++) {
		uint32_t i = (kt->next_slot + n) % kt->cap;
		struct keytab_ent *e = &kt->ent[i];

		if (__atomic_load_n(&e->key, __ATOMIC_RELAXED) != 0)
			continue;
		/* the slot's next generation, never 0 so that no key is 0 */
		gen = (kt->gen[i] + 1) & ((1u << (32 - kt->idx_bits)) - 1);
		if (gen == 0)
			gen = 1;
		kt->gen[i] = gen;
		kt->next_slot = (i + 1) % kt->cap;
		k = (gen << kt->idx_bits) | i;
		/* the field stores come after the key's removal: pairs with keytab_check() */
		__atomic_thread_fence(__ATOMIC_RELEASE);
		__atomic_store_n(&e->base, (uintptr_t)base, __ATOMIC_RELAXED);
		__atomic_store_n(&e->len, len, __ATOMIC_RELAXED);
		__atomic_store_n(&e->access, access, __ATOMIC_RELAXED);
		/* pairs with the acquire load of e->key in keytab_check() */
		__atomic_store_n(&e->key, k, __ATOMIC_RELEASE);
		pthread_mutex_unlock(&kt->lock);
		*key = k;
		return 0;
	}
	pthread_mutex_unlock(&kt->lock);
	return -ENOSPC;
}

int keytab_remove(struct keytab *kt, uint32_t key)
{
	uint32_t idx = key & ((1u << kt->idx_bits) - 1);
	int ret = -ENOENT;

	if (key == 0 || idx >= kt->cap)
		return -ENOENT;
	pthread_mutex_lock(&kt->lock);
	if (__atomic_load_n(&kt->ent[idx].key, __ATOMIC_RELAXED) == key) {
		__atomic_store_n(&kt->ent[idx].key, 0, __ATOMIC_RELEASE);
		ret = 0;
	}
	pthread_mutex_unlock(&kt->lock);
	return ret;
}

int keytab_check(const struct keytab *kt, uint32_t key, uint64_t addr, uint64_t len,
                 unsigned access, void **ptr)
{
	uint32_t idx = key & ((1u << kt->idx_bits) - 1);
	const struct keytab_ent *e;
	uint64_t base, rlen;
	unsigned acc;

	if (key == 0 || idx >= kt->cap)
		return -EACCES;
	e = &kt->ent[idx];
	if (__atomic_load_n(&e->key, __ATOMIC_ACQUIRE) != key)
		return -EACCES;
	acc = __atomic_load_n(&e->access, __ATOMIC_RELAXED);
	base = __atomic_load_n(&e->base, __ATOMIC_RELAXED);
	rlen = __atomic_load_n(&e->len, __ATOMIC_RELAXED);
	/*
	 * The slot may have been removed and reused for another region while
	 * we read: then the fields belong to a newer key. Re-read the key
	 * after them; the fence pairs with the release fence in keytab_add(),
	 * so seeing a newer field implies seeing the key change.
	 */
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	if (__atomic_load_n(&e->key, __ATOMIC_RELAXED) != key || (acc & access) != access)
		return -EACCES;
	/* addr in [base, base + rlen] and len <= rlen - (addr - base), without overflow */
	if (addr < base || addr - base > rlen || len > rlen - (addr - base))
		return -EACCES;
	*ptr = (void *)(uintptr_t)addr;
	return 0;
}
