/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * poll.c -- the consumer side of an shm fab (the bells are cq.c's, the
 * CQ ring and its wait fd ../swcq.c's): fab_poll(), which first walks the
 * links to move peers' SEND records into posted RECVs and retry requests
 * waiting for a RECV at the peer (post.c), then takes the completions;
 * what else wakes a poller (accepted links, links with work); fab_progress(),
 * a driver that walks the links and sleeps on the bell page; and the
 * provider thread's disarm of an idle fab.
 */
#include <errno.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "../../clock.h"
#include "shm.h"

/*
 * links_walk -- progress (or, with @check, test readiness of) every link;
 * @busy: the walker's mark (poll_busy: the poller; drive_busy: a driver).
 */
static int links_walk(struct shm_fab *f, unsigned *busy, int check)
{
	unsigned n;
	int any = 0;

	__atomic_add_fetch(busy, 1, __ATOMIC_SEQ_CST); /* odd: close waits */
	n = __atomic_load_n(&f->nlinks, __ATOMIC_ACQUIRE);
	for (unsigned i = 0; i < n && i < SHM_MAX_LINKS; i++) {
		struct shm_link *l = __atomic_load_n(&f->links[i], __ATOMIC_ACQUIRE);

		if (l == NULL)
			continue;
		if (check ? shm_link_ready(l) : shm_link_progress(l) > 0)
			any = 1;
		if (check && any)
			break;
	}
	__atomic_add_fetch(busy, 1, __ATOMIC_RELEASE);
	return any;
}

int shm_poll(struct fab *fab, struct fab_wc *wc, int max)
{
	struct shm_fab *f = to_shm_fab(fab);

	if (wc == NULL || max <= 0)
		return -EINVAL;
	links_walk(f, &f->poll_busy, 0);
	return fab_swcq_poll(&f->cq, wc, max);
}

int shm_wait_fd(struct fab *fab)
{
	return fab_swcq_wait_fd(&to_shm_fab(fab)->cq);
}

/*
 * shm_ready -- the CQ's ready(), after it announced the sleep (the fab
 * page's waiting raised, then a fence: pairs with the fence in shm_bell()):
 * whether the poller should poll instead, for an accepted link or a link
 * with records or deferred requests.
 */
int shm_ready(void *arg)
{
	struct shm_fab *f = arg;

	return fab_acceptq_ready(&f->acceptq) || links_walk(f, &f->poll_busy, 1);
}

int shm_arm(struct fab *fab)
{
	return fab_swcq_arm(&to_shm_fab(fab)->cq);
}

int shm_wait(struct fab *fab, int timeout_ms)
{
	return fab_swcq_wait(&to_shm_fab(fab)->cq, timeout_ms);
}

static int cq_ready(struct shm_fab *f)
{
	return !fab_swcq_empty(&f->cq);
}

/* (out of line: the spinning driver's check below pushes no registers and loads no page) */
static int progress_slow(struct shm_fab *f, int64_t timeout_ns) __attribute__((noinline));

/*
 * shm_progress -- fab_progress(): the data path needs no thread here (the
 * initiator executes), so a driver delivers the peers' SEND records,
 * retries requests waiting for the peers' RECVs, and sleeps until a peer
 * lands a WRITE, atomic or SEND here, or another thread of ours makes a
 * completion: on the bell page's seq, a process-shared futex that peers
 * bump while this fab is armed (shm_landed()). The first call after a
 * quiet spell arms and returns 1: what landed before peers bumped was not
 * counted, so the caller looks again before anyone sleeps. A call with
 * timeout 0 (a spinning waiter: LOCO_WAIT=spin) never sleeps, so it
 * neither arms nor keeps the fab armed: it only does the work, and its
 * peers' landings cost them one load, not an atomic add on a line this
 * node reads on every call (4 nodes on 2 cores, reduce 8 B: 4.6 -> 4.3
 * us). Returns 2 (a peer's WRITE, atomic or SEND landed while armed: the
 * caller wakes the threads it sent off with -EBUSY, which sleep elsewhere
 * and would otherwise sleep out their interval, 50 us to 4 ms), 1 (a
 * completion ready, work done), 0, -EBUSY (another thread drives, asleep
 * on the bell perhaps), -EINVAL.
 */
int shm_progress(struct fab *fab, int64_t timeout_ns)
{
	struct shm_fab *f = to_shm_fab(fab);

	if (timeout_ns < 0)
		return -EINVAL;
	/*
	 * A spinning waiter (LOCO_WAIT=spin) drives on every pause, and after each yield the lines
	 * it reads are cold. With no RECV posted and no request deferred on any link, a walk could
	 * only skip a peer's pad records or find a bad one early (the next walk with work does, or
	 * the thread's); a landing while armed only wakes drivers that sleep. So look at the CQ
	 * alone: no lock, no link's lines, one line of the fab (4 nodes on 2 cores, reduce 8 B: see
	 * bench/peers/README.md).
	 */
	if (timeout_ns == 0 && __atomic_load_n(&f->walk_work, __ATOMIC_ACQUIRE) == 0)
		return cq_ready(f);
	return progress_slow(f, timeout_ns);
}

/* progress_slow -- shm_progress() with the driver lock: walks, arms, sleeps. */
static int progress_slow(struct shm_fab *f, int64_t timeout_ns)
{
	struct shm_fpage *fp = f->fpage;
	uint32_t seq;
	int ret = 0;

	if (pthread_mutex_trylock(&f->drive_mu) != 0)
		return -EBUSY; /* (the thread disarms only with it held: no clock read before) */
	if (timeout_ns == 0 && !__atomic_load_n(&fp->armed, __ATOMIC_RELAXED)) {
		ret = links_walk(f, &f->drive_busy, 0) || cq_ready(f); /* no sleep: no bell */
		pthread_mutex_unlock(&f->drive_mu);
		return ret;
	}
	if (!__atomic_load_n(&fp->armed, __ATOMIC_RELAXED)) {
		__atomic_store_n(&fp->armed, 1, __ATOMIC_SEQ_CST);
		f->drive_seen = __atomic_load_n(&f->bpage->seq, __ATOMIC_SEQ_CST);
		links_walk(f, &f->drive_busy, 0);
		__atomic_store_n(&f->drive_ns, lc_coarse_ns(), __ATOMIC_RELAXED);
		pthread_mutex_unlock(&f->drive_mu);
		return 1;
	}
	seq = __atomic_load_n(&f->bpage->seq, __ATOMIC_ACQUIRE);
	if (links_walk(f, &f->drive_busy, 0) || seq != f->drive_seen || cq_ready(f)) {
		ret = 1;
	} else if (timeout_ns > 0) {
		struct timespec ts = {.tv_sec = timeout_ns / 1000000000,
		                      .tv_nsec = timeout_ns % 1000000000};

		/* the flag, then the count: pairs with shm_landed() (the count, then the flag) */
		__atomic_store_n(&fp->sleepers, 1, __ATOMIC_SEQ_CST);
		if (__atomic_load_n(&f->bpage->seq, __ATOMIC_SEQ_CST) == seq && !cq_ready(f))
			syscall(SYS_futex, &f->bpage->seq, FUTEX_WAIT, seq, &ts, NULL, 0);
		__atomic_store_n(&fp->sleepers, 0, __ATOMIC_RELAXED);
		seq = __atomic_load_n(&f->bpage->seq, __ATOMIC_ACQUIRE);
		ret = links_walk(f, &f->drive_busy, 0) || seq != f->drive_seen || cq_ready(f);
	}
	if (ret && seq != f->drive_seen)
		ret = 2; /* the bell moved: whoever we kept off the bell looks again */
	f->drive_seen = seq;
	if (timeout_ns > 0) /* only a driver that may sleep keeps the fab armed */
		__atomic_store_n(&f->drive_ns, lc_coarse_ns(), __ATOMIC_RELAXED);
	pthread_mutex_unlock(&f->drive_mu);
	return ret;
}

/*
 * shm_disarm -- the provider thread: when no driver ran for SHM_DISARM_NS,
 * peers stop bumping the bell page (a landing costs them one load again).
 * Under drive_mu: no driver is between its look at armed and its sleep.
 */
void shm_disarm(struct shm_fab *f)
{
	if (!__atomic_load_n(&f->fpage->armed, __ATOMIC_RELAXED) ||
	    lc_coarse_ns() - __atomic_load_n(&f->drive_ns, __ATOMIC_RELAXED) <
	        (uint64_t)SHM_DISARM_NS ||
	    pthread_mutex_trylock(&f->drive_mu) != 0)
		return;
	__atomic_store_n(&f->fpage->armed, 0, __ATOMIC_SEQ_CST);
	pthread_mutex_unlock(&f->drive_mu);
}
