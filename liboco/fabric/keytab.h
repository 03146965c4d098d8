/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * keytab.h -- registered-region table of a software provider: maps a key
 * to [base, base + len) with access rights, and checks accesses.
 *
 * A key is (generation << idx_bits) | slot, never 0, where idx_bits is
 * just wide enough for the table's slots and the generation takes the
 * other bits (20 for the tcp provider's 4096 keys). Each slot counts its
 * own generations and slots are taken round robin, so a key value comes
 * back only after 2^(32 - idx_bits) reuses of every slot: a key whose
 * region was removed keeps being refused.
 * Thread safety: add/remove are MT-safe (internal mutex); lookup is
 * lock-free and may run concurrently with add/remove. After remove returns,
 * a lookup that started before it may still hold the old base: the caller
 * must quiesce its lookups (the tcp provider waits out its NIC thread).
 */
#ifndef LOCO_KEYTAB_H
#define LOCO_KEYTAB_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define KEYTAB_IDX_BITS 16
#define KEYTAB_MAX      (1u << KEYTAB_IDX_BITS)

struct keytab_ent {
	uint32_t key; /* 0: free; read with acquire */
	unsigned access;
	uintptr_t base;
	size_t len;
};

struct keytab {
	pthread_mutex_t lock;
	struct keytab_ent *ent;
	uint32_t *gen; /* per slot: the last generation handed out */
	uint32_t cap;
	uint32_t idx_bits; /* bits of a key that name the slot */
	uint32_t next_slot;
};

/* keytab_init -- a table of @cap slots (1..KEYTAB_MAX). 0, -EINVAL, -ENOMEM. */
int keytab_init(struct keytab *kt, uint32_t cap);
void keytab_fini(struct keytab *kt);

/* keytab_add -- register [@base, @base + @len). 0 and *@key; -EINVAL, -ENOSPC. */
int keytab_add(struct keytab *kt, void *base, size_t len, unsigned access, uint32_t *key);

/* keytab_remove -- forget @key. 0, or -ENOENT. */
int keytab_remove(struct keytab *kt, uint32_t key);

/*
 * keytab_check -- whether @key grants @access to [@addr, @addr + @len).
 * Returns 0 and sets *@ptr to the local address; -EACCES for an unknown
 * key, a range outside the region (overflow-safe) or missing rights.
 */
int keytab_check(const struct keytab *kt, uint32_t key, uint64_t addr, uint64_t len,
                 unsigned access, void **ptr);

#endif
