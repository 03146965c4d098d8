/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * keytab.h -- registered-region table of a provider: maps a key to
 * [base, base + len) with access rights, and checks accesses.
 *
 * Two kinds of table, with one entry format and one lookup protocol:
 *  - keytab_init(): the table chooses the keys (a software provider's
 *    rkeys and lkeys). A key is (generation << idx_bits) | slot, never 0,
 *    where idx_bits is just wide enough for the table's slots and the
 *    generation takes the other bits (20 for the tcp provider's 4096 keys).
 *    Each slot counts its own generations and slots are taken round robin,
 *    so a key value comes back only after 2^(32 - idx_bits) reuses of
 *    every slot: a key whose region was removed keeps being refused.
 *    keytab_randomize() starts each slot's generations, and the round
 *    robin, at random: a stranger cannot guess a key (the first region
 *    of a program used to get the same key every time).
 *  - keytab_init_foreign(): the caller brings the keys, chosen elsewhere
 *    (the lkeys a verbs device gives its regions; any value, 0 included).
 *    A key's slot is found by hashing it, with linear probing; at most
 *    half the slots hold regions, so probe runs stay short. Removed slots
 *    stay tombstones (the probe goes on past them) until a region reuses
 *    them.
 *
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
	/*
	 * Odd while the slot holds a region, even once it was removed, 0 when
	 * it never held one; read with acquire. It changes at every add and
	 * remove, so a lookup that sees the same value before and after it
	 * read the other fields read one region's entry (a seqlock).
	 */
	uint32_t seq;
	uint32_t key;
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
	uint32_t nkeys; /* regions held */
	int foreign;    /* keys come from the caller: slots by hash (keytab_init_foreign) */
};

/* keytab_init -- a table of @cap slots (1..KEYTAB_MAX) choosing its keys. 0, -EINVAL, -ENOMEM. */
int keytab_init(struct keytab *kt, uint32_t cap);

/*
 * keytab_randomize -- make the keys of @kt (keytab_init()) unguessable:
 * every slot's generation starts at random bits from getrandom(), and so
 * does the round robin of slots. Keys stay unique and never 0, and a key
 * of a removed region keeps being refused as before. Call it before the
 * first keytab_add(). 0, -EINVAL (a foreign table), or getrandom's error.
 */
int keytab_randomize(struct keytab *kt);

/*
 * keytab_init_foreign -- a table of @cap slots, a power of two in
 * 2..KEYTAB_MAX, for keys the caller brings (keytab_add_foreign); it
 * holds at most @cap / 2 regions. 0, -EINVAL, -ENOMEM.
 */
int keytab_init_foreign(struct keytab *kt, uint32_t cap);

void keytab_fini(struct keytab *kt);

/*
 * keytab_add -- register [@base, @base + @len) under a new key of the
 * table's choosing. 0 and *@key; -EINVAL (also on a foreign table), -ENOSPC.
 */
int keytab_add(struct keytab *kt, void *base, size_t len, unsigned access, uint32_t *key);

/*
 * keytab_add_foreign -- register [@base, @base + @len) under @key, on a
 * foreign table. 0; -EINVAL (bad range, or a table that chooses its keys),
 * -EEXIST (@key holds a region already), -ENOSPC (half the slots in use).
 */
int keytab_add_foreign(struct keytab *kt, uint32_t key, void *base, size_t len, unsigned access);

/* keytab_remove -- forget @key. 0, or -ENOENT. */
int keytab_remove(struct keytab *kt, uint32_t key);

/*
 * keytab_check -- whether @key grants @access to [@addr, @addr + @len).
 * Returns 0 and sets *@ptr to the local address; -EACCES for an unknown
 * key, a range outside the region (overflow-safe) or missing rights.
 */
int keytab_check(const struct keytab *kt, uint32_t key, uint64_t addr, uint64_t len,
                 unsigned access, void **ptr);

/*
 * What one caller found the last time (keytab_check_last()): the entry,
 * the seq it had, a copy. Zero it to start. Not thread-safe: one caller
 * at a time (a link's post lock).
 */
struct keytab_last {
	const struct keytab_ent *e; /* NULL: none */
	uint32_t seq;               /* odd: valid while the slot still says so */
	struct keytab_ent c;
};

/*
 * keytab_check_last -- keytab_check() for a caller that checks the same
 * key again and again (a link's source buffers): while the key's slot
 * keeps the seq it had when @last read it (every add and remove moves
 * it), the entry is the copy in @last, not read again (shm, 8 B WRITE +
 * completion: 81 -> 47 instructions for the source's check, callgrind). Same
 * results as keytab_check().
 */
int keytab_check_last(const struct keytab *kt, struct keytab_last *last, uint32_t key,
                      uint64_t addr, uint64_t len, unsigned access, void **ptr);

#endif
