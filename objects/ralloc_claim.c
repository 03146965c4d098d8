/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ralloc_claim.c -- the remote allocator's slow path: refills that READ a
 * window of a host's table and claim free slices by CAS, runs of slices
 * for blocks above one slice, and the settling of claims that timed out.
 * The design is at the top of ralloc.c. Public API only.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include "obj_util.h"
#include "ralloc_impl.h"

/* ra_host_rr -- under lock: look up @h's table and heap once per pairing. */
int ra_host_rr(loco_ralloc_t *ra, struct ra_host *h)
{
	loco_rref_t t, hp;
	int ret;

	if (h->have_rr)
		return 0;
	ret = loco_region_remote(ra->table, h->node, &t);
	if (ret == 0)
		ret = loco_region_remote(ra->heap, h->node, &hp);
	if (ret)
		return ret;
	h->rr_table = t;
	h->rr_heap = hp;
	h->have_rr = 1;
	return 0;
}

/*
 * ra_give_back -- under lock: return EMPTY slices of @h to its host until
 * @h keeps @keep of them, with one CAS each (word -> 0) posted together
 * and not waited for: a later claim of the same slice is posted after
 * them and executes after them (requests to one node execute in order).
 * A full ack key leaves the rest in the cache for the next time.
 */
void ra_give_back(loco_ralloc_t *ra, struct ra_host *h, uint32_t keep)
{
	while (h->nempty > keep && h->empty >= 0) {
		uint32_t i = (uint32_t)h->empty;

		if (!h->gone && h->have_rr &&
		    (loco_ack_outstanding(ra->give_ack) >= RA_GIVE_MAX ||
		     loco_cas(ra->scratch, junk_off(ra), &h->rr_table, (size_t)i * 8, h->word, 0,
		              ra->give_ack) != 0))
			return;
		list_del(h, &h->empty, i);
		h->nempty--;
		h->owned--;
		h->sl[i].kind = K_FREE;
		ra->st.returned++;
		ra->give_seq++;
	}
}

/*
 * ra_settle -- wait for every operation on @ack by @deadline (polling): 0,
 * their error, -ETIMEDOUT. Whether the key was idle is looked at BEFORE
 * each test: another thread (the progress thread) may reap the last
 * completion between a test that said -ETIMEDOUT (busy) and a count after
 * it, which then read 0 and took the busy key's -ETIMEDOUT for the
 * operations' result (on shm, whose completions are there at once, 1 in
 * 15 runs of ralloc-exhaust failed so, as -ETIMEDOUT or -ECONNRESET).
 */
static int ra_settle(loco_ralloc_t *ra, loco_ack_key_t *ack, int64_t deadline)
{
	loco_waiter_t w;
	int ret;

	loco_waiter_init(&w, ra->m);
	for (;;) {
		/* only this thread attaches to @ack (refill_lock): idle stays idle */
		int idle = loco_ack_outstanding(ack) == 0;

		ret = loco_ack_wait(ack, 0); /* reaps and tests, no partition check */
		if (ret != -ETIMEDOUT || idle)
			return ret;
		if (deadline >= 0 && obj_now_ns() >= deadline && loco_ack_outstanding(ack) != 0)
			return -ETIMEDOUT; /* (settled since the test: the next test says how) */
		loco_waiter_pause(&w);
	}
}

/*
 * pend_finish -- under refill_lock, once the pending batch settled: the
 * slices whose CAS found 0 are this node's (EMPTY, cached) unless the
 * host left since (then its reset covered them). A slot still holding
 * the sentinel is a CAS that failed on the link: whether it executed is
 * unknown, and adopt() finds it later if it did.
 */
static uint32_t pend_finish(loco_ralloc_t *ra)
{
	struct ra_pend *p = &ra->pend;
	struct ra_host *h = p->h;
	uint32_t won = 0;

	if (!p->active)
		return 0;
	pthread_mutex_lock(&ra->lock);
	for (uint32_t k = 0; k < p->n; k++) {
		uint32_t i = p->idx[k];
		uint64_t old = __atomic_load_n(&res(ra)[i], __ATOMIC_ACQUIRE);

		if (h->gen != p->gen)
			break;
		if (old == 0) { /* a run's slice (K_RESV, whose refill timed out) is cached too */
			h->sl[i].kind = K_EMPTY;
			list_push(h, &h->empty, i);
			h->nempty++;
			h->owned++;
			ra->st.claimed++;
			won++;
		} else {
			h->sl[i].kind = K_FREE;
			ra->st.lost += old != RA_SENTINEL;
		}
	}
	pthread_mutex_unlock(&ra->lock);
	p->active = 0;
	p->n = 0;
	return won;
}

/* ra_pend_settle -- under refill_lock: settle and finish an earlier batch first. */
int ra_pend_settle(loco_ralloc_t *ra, int64_t deadline)
{
	int ret;

	if (!ra->pend.active && loco_ack_outstanding(ra->claim_ack) == 0)
		return 0;
	ret = ra_settle(ra, ra->claim_ack, deadline);
	if (ret == -ETIMEDOUT)
		return ret;
	pend_finish(ra);
	return 0;
}

/*
 * adopt -- under lock: slices whose word on the host is this node's but
 * which the shadow thinks free: a claim whose CAS executed but whose
 * completion failed on the link. Only when no give-back was in flight
 * when the READ of the table was posted, and none was posted since
 * (@gseq, from host_snapshot(), is still ra->give_seq): a give-back
 * that executes after the READ leaves this node's word in the copy.
 */
static void adopt(loco_ralloc_t *ra, struct ra_host *h, uint32_t start, uint32_t n, uint64_t gseq)
{
	if (gseq != ra->give_seq)
		return;
	for (uint32_t i = start; i < start + n; i++) {
		if (snap(ra)[i] != h->word || h->sl[i].kind != K_FREE)
			continue;
		h->sl[i].kind = K_EMPTY;
		list_push(h, &h->empty, i);
		h->nempty++;
		h->owned++;
		ra->st.claimed++;
	}
}

/*
 * post_retry -- post with @fn until it is not refused for a full queue
 * (-EAGAIN: the fabric drains it), by @deadline.
 */
static int post_retry(loco_ralloc_t *ra, int64_t deadline, int (*fn)(void *arg), void *arg)
{
	loco_waiter_t w;
	int ret;

	loco_waiter_init(&w, ra->m);
	while ((ret = fn(arg)) == -EAGAIN) {
		if (deadline >= 0 && obj_now_ns() >= deadline)
			return -ETIMEDOUT;
		loco_waiter_pause(&w);
	}
	return ret;
}

struct post_args {
	loco_ralloc_t *ra;
	const loco_rref_t *rt;
	uint32_t i, n; /* READ: entries [i, i + n); CAS: slice i */
	uint64_t word;
};

static int post_read(void *arg)
{
	struct post_args *a = arg;

	return loco_read(a->ra->scratch, (size_t)a->i * 8, a->rt, (size_t)a->i * 8,
	                 (size_t)a->n * 8, a->ra->claim_ack);
}

static int post_cas(void *arg)
{
	struct post_args *a = arg;

	return loco_cas(a->ra->scratch, res_off(a->ra, a->i), a->rt, (size_t)a->i * 8, 0, a->word,
	                a->ra->claim_ack);
}

/* read_table -- under refill_lock: entries [@start, @start + @n) of @h's table into snap(). */
static int read_table(loco_ralloc_t *ra, const loco_rref_t *rt, uint32_t start, uint32_t n,
                      int64_t deadline)
{
	struct post_args a = {.ra = ra, .rt = rt, .i = start, .n = n};
	int ret = post_retry(ra, deadline, post_read, &a);

	if (ret) /* -ETIMEDOUT: the queue stayed full; -ENOTCONN: no link */
		return ret != -ETIMEDOUT && obj_peer_gone_err(ret) ? -ECONNRESET : ret;
	ra->pend.active = 1; /* a READ in flight: the next refill settles it first */
	ra->pend.n = 0;
	ret = ra_settle(ra, ra->claim_ack, deadline);
	if (ret == -ETIMEDOUT && loco_ack_outstanding(ra->claim_ack) != 0)
		return ret;
	ra->pend.active = 0;
	/* the link failed: the host died, or the view is about to say so */
	return obj_peer_gone_err(ret) ? -ECONNRESET : ret;
}

/* post_claims -- under refill_lock: CAS 0 -> word for pend.idx[0 .. n); waits by @deadline. */
static int post_claims(loco_ralloc_t *ra, struct ra_host *h, const loco_rref_t *rt, uint64_t gen,
                       uint64_t word, int64_t deadline)
{
	struct ra_pend *p = &ra->pend;
	uint32_t posted = 0;
	int ret = 0;

	p->active = 1;
	p->h = h;
	p->gen = gen;
	for (uint32_t k = 0; k < p->n; k++) /* a slot not posted or failed keeps it */
		__atomic_store_n(&res(ra)[p->idx[k]], RA_SENTINEL, __ATOMIC_RELAXED);
	for (uint32_t k = 0; k < p->n; k++) {
		struct post_args a = {.ra = ra, .rt = rt, .i = p->idx[k], .word = word};

		ret = post_retry(ra, deadline, post_cas, &a);
		if (ret)
			break;
		posted++;
	}
	p->n = posted;
	if (posted == 0) {
		pend_finish(ra);
		return ret != -ETIMEDOUT && obj_peer_gone_err(ret) ? -ECONNRESET
		       : ret                                       ? ret
		                                                   : -EAGAIN;
	}
	ret = ra_settle(ra, ra->claim_ack, deadline);
	if (ret == -ETIMEDOUT)
		return ret;
	return 0; /* the results say what each did */
}

/*
 * host_snapshot -- under lock, before a READ of @h's table: @h's gen,
 * word and table rref, or its error; in *@gseq what adopt() needs.
 */
static int host_snapshot(loco_ralloc_t *ra, struct ra_host *h, uint64_t *gen, uint64_t *word,
                         loco_rref_t *rt, uint64_t *gseq)
{
	int ret;

	if (h->gone)
		return -ECONNRESET;
	ret = ra_host_rr(ra, h);
	if (ret)
		return ret;
	*gen = h->gen;
	*word = h->word;
	*rt = h->rr_table;
	*gseq = loco_ack_outstanding(ra->give_ack) == 0 ? ra->give_seq : UINT64_MAX;
	return 0;
}

/*
 * ra_refill -- claim up to batch slices of @h into its cache: READ a window
 * of its table from the cursor on, CAS the free entries, and move the
 * cursor on when a window has none left. Returns how many were won (> 0),
 * or -ENOMEM after a whole lap of the table found no free slice.
 */
int ra_refill(loco_ralloc_t *ra, struct ra_host *h, int64_t deadline)
{
	uint32_t nwin = (ra->nslices + RA_WINDOW - 1) / RA_WINDOW + 1;
	uint64_t gen, word, gseq;
	loco_rref_t rt;
	int ret;

	pthread_mutex_lock(&ra->refill_lock);
	ret = ra_pend_settle(ra, deadline);
	if (ret)
		goto out;
	for (uint32_t w = 0; w <= nwin; w++) {
		uint32_t start = h->cursor, n = ra->nslices - start, nfree = 0;

		if (n > RA_WINDOW)
			n = RA_WINDOW;
		if (loco_channel_partitioned(loco_object_channel(ra->obj))) {
			ret = -LOCO_EPARTITION;
			goto out;
		}
		pthread_mutex_lock(&ra->lock);
		ret = host_snapshot(ra, h, &gen, &word, &rt, &gseq);
		if (ret == 0 && h->nempty > 0)
			ret = 1; /* another thread's refill came first */
		pthread_mutex_unlock(&ra->lock);
		if (ret)
			goto out;
		if (w == 0) {
			pthread_mutex_lock(&ra->lock);
			ra->st.slow++;
			pthread_mutex_unlock(&ra->lock);
		}
		ret = read_table(ra, &rt, start, n, deadline);
		if (ret)
			goto out;
		pthread_mutex_lock(&ra->lock);
		if (h->gen != gen) {
			pthread_mutex_unlock(&ra->lock);
			ret = -ECONNRESET;
			goto out;
		}
		adopt(ra, h, start, n, gseq);
		ra->pend.n = 0;
		for (uint32_t i = start; i < start + n; i++) {
			if (snap(ra)[i] != 0 || h->sl[i].kind != K_FREE)
				continue;
			nfree++;
			if (ra->pend.n < ra->batch)
				ra->pend.idx[ra->pend.n++] = i;
		}
		/* nothing left here after this batch: look further next time */
		if (nfree <= ra->pend.n)
			h->cursor = start + n == ra->nslices ? 0 : start + n;
		ret = h->nempty > 0;
		pthread_mutex_unlock(&ra->lock);
		if (ra->pend.n == 0) {
			if (ret)
				goto out; /* adopted some */
			continue;
		}
		ret = post_claims(ra, h, &rt, gen, word, deadline);
		if (ret)
			goto out;
		ret = (int)pend_finish(ra);
		pthread_mutex_lock(&ra->lock);
		if (h->nempty > 0)
			ret = ret > 0 ? ret : 1;
		pthread_mutex_unlock(&ra->lock);
		if (ret > 0)
			goto out;
	}
	ret = -ENOMEM;
out:
	pthread_mutex_unlock(&ra->refill_lock);
	return ret;
}

/*
 * ra_run_claim -- claim a run of @n contiguous slices of @h for one block:
 * READ the whole table, take the first run whose slices are free there
 * (or this node's cached EMPTY ones), CAS the free ones; a lost CAS puts
 * what was won into the cache and tries again (RA_RUN_TRIES times).
 * Returns the run's first slice, or -ENOMEM.
 */
int ra_run_claim(loco_ralloc_t *ra, struct ra_host *h, uint32_t n, int64_t deadline)
{
	uint64_t gen, word, gseq;
	loco_rref_t rt;
	int ret;

	pthread_mutex_lock(&ra->refill_lock);
	ret = ra_pend_settle(ra, deadline);
	if (ret)
		goto out;
	for (int t = 0; t < RA_RUN_TRIES; t++) {
		int32_t first = -1;
		bool all = true;
		int pret = 0;

		if (loco_channel_partitioned(loco_object_channel(ra->obj))) {
			ret = -LOCO_EPARTITION;
			goto out;
		}
		pthread_mutex_lock(&ra->lock);
		ret = host_snapshot(ra, h, &gen, &word, &rt, &gseq);
		if (ret == 0)
			ra->st.slow++;
		pthread_mutex_unlock(&ra->lock);
		if (ret)
			goto out;
		ret = read_table(ra, &rt, 0, ra->nslices, deadline);
		if (ret)
			goto out;
		pthread_mutex_lock(&ra->lock);
		if (h->gen != gen) {
			pthread_mutex_unlock(&ra->lock);
			ret = -ECONNRESET;
			goto out;
		}
		adopt(ra, h, 0, ra->nslices, gseq);
		for (uint32_t s = 0, len = 0; s < ra->nslices; s++) {
			const struct ra_slice *sl = &h->sl[s];

			if ((sl->kind == K_FREE && snap(ra)[s] == 0) || sl->kind == K_EMPTY)
				len++;
			else
				len = 0;
			if (len == n) {
				first = (int32_t)(s + 1 - n);
				break;
			}
		}
		if (first < 0) {
			pthread_mutex_unlock(&ra->lock);
			ret = -ENOMEM;
			goto out;
		}
		ra->pend.n = 0;
		for (uint32_t i = (uint32_t)first; i < (uint32_t)first + n; i++) {
			struct ra_slice *sl = &h->sl[i];

			sl->cached = sl->kind == K_EMPTY;
			if (sl->cached) {
				list_del(h, &h->empty, i);
				h->nempty--;
			} else {
				ra->pend.idx[ra->pend.n++] = i;
			}
			sl->kind = K_RESV;
		}
		pthread_mutex_unlock(&ra->lock);
		if (ra->pend.n > 0)
			pret = post_claims(ra, h, &rt, gen, word, deadline);
		pthread_mutex_lock(&ra->lock);
		if (pret == -ETIMEDOUT) {
			/* the claimed ones go to the cache when they settle; the cached ones now */
			for (uint32_t i = (uint32_t)first; i < (uint32_t)first + n; i++) {
				uint32_t k = 0;

				if (h->gen != gen)
					break;
				if (h->sl[i].kind != K_RESV)
					continue;
				if (h->sl[i].cached) {
					h->sl[i].kind = K_EMPTY;
					list_push(h, &h->empty, i);
					h->nempty++;
					continue;
				}
				while (k < ra->pend.n && ra->pend.idx[k] != i)
					k++;
				if (k == ra->pend.n) /* never posted */
					h->sl[i].kind = K_FREE;
			}
			pthread_mutex_unlock(&ra->lock);
			ret = pret;
			goto out;
		}
		/* settled: a claimed slice is ours when its CAS found 0 */
		ra->pend.active = 0;
		ra->pend.n = 0;
		if (h->gen != gen) { /* the host left: its reset cleared the run */
			pthread_mutex_unlock(&ra->lock);
			ret = -ECONNRESET;
			goto out;
		}
		for (uint32_t i = (uint32_t)first; i < (uint32_t)first + n; i++) {
			struct ra_slice *sl = &h->sl[i];
			uint64_t old = __atomic_load_n(&res(ra)[i], __ATOMIC_ACQUIRE);

			if (sl->cached)
				continue;
			if (old == 0) {
				h->owned++;
				ra->st.claimed++;
				continue;
			}
			all = false;
			sl->kind = K_FREE;
			ra->st.lost += old != RA_SENTINEL;
		}
		for (uint32_t i = (uint32_t)first; i < (uint32_t)first + n; i++) {
			struct ra_slice *sl = &h->sl[i];

			if (sl->kind != K_RESV)
				continue;
			sl->cached = 0;
			if (all) {
				sl->kind = i == (uint32_t)first ? K_RUN : K_BODY;
				sl->run = i == (uint32_t)first ? n : 0;
			} else {
				sl->kind = K_EMPTY;
				list_push(h, &h->empty, i);
				h->nempty++;
			}
		}
		if (!all)
			ra_give_back(ra, h, ra->keep);
		pthread_mutex_unlock(&ra->lock);
		if (all) {
			ret = first;
			goto out;
		}
		if (pret) {
			ret = pret;
			goto out;
		}
	}
	ret = -ENOMEM;
out:
	pthread_mutex_unlock(&ra->refill_lock);
	return ret;
}
