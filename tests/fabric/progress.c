/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * progress.c -- fab_progress() (fabric.h): a thread that lends itself to
 * a software provider sees remote WRITEs land and its own requests
 * complete through it, and nothing is lost when it stops lending itself.
 * A provider whose hardware does the work says -EOPNOTSUPP, always.
 *
 * 1. Ping-pong, each side's thread driving its own fab: a WRITEs a
 *    sequence number into b, b's driver sees it and WRITEs it back; every
 *    completion is reaped by fab_poll() after fab_progress() (the caller's
 *    job), none is lost or doubled, every value arrives in order.
 * 2. Hand-over: b's driver stops; WRITEs a posts afterwards still land in
 *    b and complete (b's own thread takes over), within the failure bound.
 * 3. Two threads drive b at once while a third streams WRITEs from b to a
 *    (more than a send queue's worth, so the streaming path batches):
 *    -EBUSY to one of them at times, never a deadlock; every completion
 *    once (the two take turns at fab_poll(), which is serialized).
 * 4. A driver that leaves right after a WRITE it waited for landed (it
 *    ACKs on its next turn, which never comes): the initiator's request
 *    still completes, within the failure bound (b's NIC thread ACKs when
 *    it takes over).
 * 5. A link closed by another thread while a driver sleeps in
 *    fab_progress() with a long timeout: the close returns (the sleeper is
 *    woken to do it) well before that timeout.
 * 6. tcp: while a thread spins (fab_progress(b, 0) again and again), a
 *    driver that would sleep gets -EBUSY (it would wake for the spinner's
 *    events and wait for the role it holds); a WRITE that lands meanwhile
 *    makes the spinner's call return 2 (wake the one sent off); once the
 *    spinning stopped, the driver sleeps again.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"

#define TMO    5000 /* ms: any bound below is a failure bound, not a speed target */
#define ROUNDS 2000
#define STREAM 3000 /* WRITEs in part 3: more than a send queue (256) */

static struct fab *a, *b;
static struct fab_link *la, *lb;
static uint64_t *abuf, *bbuf;
static struct fab_mr *amr, *bmr;

static struct fab_wr wr_write(struct fab_mr *src, uint64_t *local, struct fab_mr *dst,
                              uint64_t *remote, uint64_t wrid)
{
	return t_wr_rdma(FAB_OP_WRITE, wrid, FAB_WR_SIGNALED, local, 8, src->lkey,
	                 (uint64_t)(uintptr_t)remote, dst->rkey);
}

/* drive_until -- drive @fab until *@word == @want, reaping completions into *@done. */
static void drive_until(struct fab *fab, volatile uint64_t *word, uint64_t want, uint64_t *done)
{
	int64_t t0 = t_now_ms();
	struct fab_wc wc[16];

	while (__atomic_load_n(word, __ATOMIC_ACQUIRE) != want) {
		int ret = fab_progress(fab, 200000);

		if (ret < 0 && ret != -EBUSY)
			T_FAIL("fab_progress: %s", t_errname(ret));
		for (int n; (n = fab_poll(fab, wc, 16)) > 0;)
			for (int i = 0; i < n; i++) {
				T_ASSERT_EQ(wc[i].status, 0);
				(*done)++;
			}
		if (t_now_ms() - t0 > TMO)
			T_FAIL("value %llu never arrived (have %llu)", (unsigned long long)want,
			       (unsigned long long)*word);
	}
}

struct pong {
	uint64_t rounds, done;
};

static void *pong_main(void *arg)
{
	struct pong *p = arg;

	for (uint64_t i = 1; i <= p->rounds; i++) {
		struct fab_wr wr;

		drive_until(b, &bbuf[0], i, &p->done);
		bbuf[8] = i;
		wr = wr_write(bmr, &bbuf[8], amr, &abuf[0], i);
		T_ASSERT_OK(fab_post(lb, &wr, 1));
	}
	/* the last completions */
	for (int64_t t0 = t_now_ms(); p->done < p->rounds && t_now_ms() - t0 < TMO;) {
		struct fab_wc wc[16];

		fab_progress(b, 100000);
		for (int n; (n = fab_poll(b, wc, 16)) > 0;)
			p->done += (uint64_t)n;
	}
	return NULL;
}

static void ping_pong(void)
{
	struct pong p = {.rounds = ROUNDS};
	uint64_t done = 0;
	int64_t t0 = t_now_ms();
	pthread_t th;

	T_ASSERT_OK(pthread_create(&th, NULL, pong_main, &p));
	for (uint64_t i = 1; i <= ROUNDS; i++) {
		struct fab_wr wr;

		abuf[8] = i;
		wr = wr_write(amr, &abuf[8], bmr, &bbuf[0], i);
		T_ASSERT_OK(fab_post(la, &wr, 1));
		drive_until(a, &abuf[0], i, &done);
	}
	for (int64_t t1 = t_now_ms(); done < ROUNDS && t_now_ms() - t1 < TMO;) {
		struct fab_wc wc[16];

		fab_progress(a, 100000);
		for (int n; (n = fab_poll(a, wc, 16)) > 0;)
			done += (uint64_t)n;
	}
	T_ASSERT_OK(pthread_join(th, NULL));
	T_ASSERT_EQ(done, ROUNDS);
	T_ASSERT_EQ(p.done, ROUNDS);
	printf("ping-pong, both sides driving: %d round trips in %lld ms, every completion "
	       "once: ok\n",
	       ROUNDS, (long long)(t_now_ms() - t0));
}

static void hand_over(void)
{
	uint64_t base = bbuf[0];

	/* b drove in part 1 and stopped: its own thread serves what comes now */
	for (uint64_t i = 1; i <= 100; i++) {
		struct fab_wr wr;
		struct fab_wc wc;
		int64_t t0 = t_now_ms();

		abuf[8] = base + i;
		wr = wr_write(amr, &abuf[8], bmr, &bbuf[0], 100000 + i);
		T_ASSERT_OK(fab_post(la, &wr, 1));
		T_ASSERT_OK(t_poll_one(a, &wc, TMO));
		T_ASSERT_EQX(wc.wrid, wr.wrid);
		T_ASSERT_EQ(wc.status, 0);
		while (__atomic_load_n(&bbuf[0], __ATOMIC_ACQUIRE) != base + i)
			if (t_now_ms() - t0 > TMO)
				T_FAIL("WRITE %llu completed but never landed",
				       (unsigned long long)i);
		if (i % 10 == 0)
			t_sleep_ms(3); /* past any time a driver keeps b's thread off */
	}
	printf("hand-over: 100 WRITEs after b's driver left landed and completed: ok\n");
}

struct driver {
	volatile int *stop;
	uint64_t calls, busy, done;
};

static pthread_mutex_t poll_mu = PTHREAD_MUTEX_INITIALIZER; /* fab_poll() is serialized */

static void *driver_main(void *arg)
{
	struct driver *d = arg;
	struct fab_wc wc[16];

	while (!__atomic_load_n(d->stop, __ATOMIC_ACQUIRE)) {
		int ret = fab_progress(b, 50000);

		d->calls++;
		if (ret == -EBUSY)
			d->busy++;
		else if (ret < 0)
			T_FAIL("fab_progress: %s", t_errname(ret));
		pthread_mutex_lock(&poll_mu);
		for (int n; (n = fab_poll(b, wc, 16)) > 0;)
			for (int i = 0; i < n; i++) {
				T_ASSERT_EQ(wc[i].status, 0);
				__atomic_add_fetch(&d->done, 1, __ATOMIC_RELAXED);
			}
		pthread_mutex_unlock(&poll_mu);
	}
	return NULL;
}

static void two_drivers(void)
{
	volatile int stop = 0;
	struct driver d[2] = {{.stop = &stop}, {.stop = &stop}};
	pthread_t th[2];
	uint64_t posted = 0;
	int64_t t0 = t_now_ms();

	for (int i = 0; i < 2; i++)
		T_ASSERT_OK(pthread_create(&th[i], NULL, driver_main, &d[i]));
	while (posted < STREAM) {
		struct fab_wr wr;
		int ret;

		bbuf[16 + posted % 64] = posted;
		wr = wr_write(bmr, &bbuf[16 + posted % 64], amr, &abuf[16 + posted % 64],
		              200000 + posted);
		ret = fab_post(lb, &wr, 1);
		if (ret == -EAGAIN) { /* the send queue is full: the drivers empty it */
			if (t_now_ms() - t0 > TMO)
				T_FAIL("the send queue stayed full");
			t_sleep_us(20);
			continue;
		}
		T_ASSERT_OK(ret);
		posted++;
	}
	while (__atomic_load_n(&d[0].done, __ATOMIC_RELAXED) +
	           __atomic_load_n(&d[1].done, __ATOMIC_RELAXED) <
	       STREAM) {
		if (t_now_ms() - t0 > TMO)
			T_FAIL("%llu of %d completions",
			       (unsigned long long)(d[0].done + d[1].done), STREAM);
		t_sleep_ms(1);
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < 2; i++)
		T_ASSERT_OK(pthread_join(th[i], NULL));
	T_ASSERT_EQ(d[0].done + d[1].done, STREAM);
	T_EXPECT_NONE(b, 20);
	printf("two drivers, %d streamed WRITEs: %llu + %llu completions, %llu + %llu of %llu "
	       "calls found the other driving: ok\n",
	       STREAM, (unsigned long long)d[0].done, (unsigned long long)d[1].done,
	       (unsigned long long)d[0].busy, (unsigned long long)d[1].busy,
	       (unsigned long long)(d[0].calls + d[1].calls));
}

struct leaver {
	uint64_t want;
	uint64_t done;
};

static void *leaver_main(void *arg)
{
	struct leaver *lv = arg;

	drive_until(b, &bbuf[0], lv->want, &lv->done);
	return NULL; /* gone: the WRITE's ACK is owed */
}

static void driver_leaves(void)
{
	struct leaver lv = {.want = 0xfeed0001};
	struct fab_wr wr;
	struct fab_wc wc;
	pthread_t th;
	int64_t t0;

	T_ASSERT_OK(pthread_create(&th, NULL, leaver_main, &lv));
	t_sleep_ms(20); /* the leaver drives b by now */
	abuf[8] = lv.want;
	wr = wr_write(amr, &abuf[8], bmr, &bbuf[0], 300000);
	t0 = t_now_ms();
	T_ASSERT_OK(fab_post(la, &wr, 1));
	T_ASSERT_OK(pthread_join(th, NULL)); /* it saw the WRITE and left */
	T_ASSERT_OK(t_poll_one(a, &wc, TMO));
	T_ASSERT_EQX(wc.wrid, wr.wrid);
	T_ASSERT_EQ(wc.status, 0);
	printf("a driver left with the ACK of the WRITE it saw owed: completed after %lld ms: "
	       "ok\n",
	       (long long)(t_now_ms() - t0));
}

static void *sleeper_main(void *arg)
{
	int *ret = arg;

	*ret = fab_progress(b, 3000000000ll); /* 3 s */
	return NULL;
}

static void close_while_driving(void)
{
	pthread_t th;
	int64_t t0;
	int ret = 99;

	T_ASSERT_OK(pthread_create(&th, NULL, sleeper_main, &ret));
	t_sleep_ms(100); /* the sleeper holds b's NIC role in epoll by now */
	t0 = t_now_ms();
	T_ASSERT_OK(fab_link_close(lb));
	T_ASSERT(t_now_ms() - t0 < 2500); /* woken for it, not at its 3 s timeout */
	T_ASSERT_OK(pthread_join(th, NULL));
	T_ASSERT(ret >= 0);
	printf("a link closed while a driver slept in fab_progress: closed after %lld ms: ok\n",
	       (long long)(t_now_ms() - t0));
}

struct spinner {
	int stop, max_ret;
	uint64_t done;
};

static void *spinner_main(void *arg)
{
	struct spinner *sp = arg;
	struct fab_wc wc[16];

	while (!__atomic_load_n(&sp->stop, __ATOMIC_ACQUIRE)) {
		int ret = fab_progress(b, 0);

		if (ret < 0 && ret != -EBUSY)
			T_FAIL("fab_progress: %s", t_errname(ret));
		if (ret > sp->max_ret)
			sp->max_ret = ret;
		for (int n; (n = fab_poll(b, wc, 16)) > 0;)
			sp->done += (uint64_t)n;
	}
	return NULL;
}

static void spinner_keeps_sleepers_off(void)
{
	struct spinner sp = {0};
	struct fab_wr wr;
	struct fab_wc wc;
	pthread_t th;
	int ret = -1;

	T_ASSERT_OK(pthread_create(&th, NULL, spinner_main, &sp));
	t_sleep_ms(20); /* it spins by now */
	/* -EBUSY at once while it spins; a sleep, if the host kept it off the CPU meanwhile */
	for (int64_t t0 = t_now_ms(); (ret = fab_progress(b, 1000000)) != -EBUSY;) {
		T_ASSERT(ret >= 0);
		if (t_now_ms() - t0 > TMO)
			T_FAIL("a driver slept in epoll beside a spinner for %d ms", TMO);
	}
	abuf[9] = 0xfeed0002;
	wr = wr_write(amr, &abuf[9], bmr, &bbuf[1], 400000);
	T_ASSERT_OK(fab_post(la, &wr, 1));
	T_ASSERT_OK(t_poll_one(a, &wc, TMO));
	T_ASSERT_EQ(wc.status, 0);
	T_ASSERT_EQX(__atomic_load_n(&bbuf[1], __ATOMIC_ACQUIRE), 0xfeed0002);
	/* the spinner's next call that finds the landing says so */
	for (int64_t t0 = t_now_ms(); __atomic_load_n(&sp.max_ret, __ATOMIC_RELAXED) < 2;) {
		if (t_now_ms() - t0 > TMO)
			T_FAIL("the spinner's fab_progress() never returned 2 for the landing");
		t_sleep_ms(1);
	}
	__atomic_store_n(&sp.stop, 1, __ATOMIC_RELEASE);
	T_ASSERT_OK(pthread_join(th, NULL));
	t_sleep_ms(5); /* past TCP_SPINNER_NS: nobody spins */
	for (int i = 0; i < 100 && (ret = fab_progress(b, 1000000)) == -EBUSY; i++)
		t_sleep_ms(1); /* the NIC thread may hold the role a moment */
	T_ASSERT(ret >= 0);
	printf("a spinner kept a sleeper off epoll, and said 2 for a landing: ok\n");
}

int main(void)
{
	int ret;

	t_init("progress", 90);
	a = t_fab_open(NULL);
	b = t_fab_open(NULL);
	abuf = t_alloc(4096);
	bbuf = t_alloc(4096);
	amr = t_mr_reg(a, abuf, 4096, FAB_ACCESS_LOCAL_WRITE | FAB_ACCESS_REMOTE_WRITE);
	bmr = t_mr_reg(b, bbuf, 4096, FAB_ACCESS_LOCAL_WRITE | FAB_ACCESS_REMOTE_WRITE);
	t_pair(a, b, 1, 2, &la, &lb);

	ret = fab_progress(a, 0);
	if (ret == -EOPNOTSUPP) {
		/* the hardware does the work: the answer never changes, and nothing else does */
		T_ASSERT_ERR(fab_progress(b, 1000000), -EOPNOTSUPP);
		hand_over();
		printf("fab_progress: -EOPNOTSUPP on %s (the hardware does the work): ok\n",
		       t_provider());
		T_ASSERT_OK(fab_link_close(lb));
	} else {
		T_ASSERT(ret == 0 || ret == 1);
		T_ASSERT_ERR(fab_progress(a, -1), -EINVAL);
		ping_pong();
		t_sleep_ms(3);
		hand_over();
		two_drivers();
		driver_leaves();
		if (strcmp(t_provider(), "tcp") == 0)
			spinner_keeps_sleepers_off();
		close_while_driving();
	}
	T_ASSERT_OK(fab_link_close(la));
	T_ASSERT_OK(fab_mr_dereg(amr));
	T_ASSERT_OK(fab_mr_dereg(bmr));
	fab_close(a);
	fab_close(b);
	t_free(abuf, 4096);
	t_free(bbuf, 4096);
	printf("progress: PASS\n");
	return T_EXIT_PASS;
}
