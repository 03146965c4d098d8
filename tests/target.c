/* SPDX-License-Identifier: BSD-2-Clause */
/* target.c -- the forked one-sided target of the fabric tests (t_target_*): see helpers.h. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"
#include "proc.h"

/* ---- a forked one-sided target ------------------------------------------------ */

enum {
	T_CMD_QUIT = 1,
	T_CMD_CHECK
};

struct t_cmd {
	uint32_t op;
	uint32_t reg;
	uint64_t off;
	uint64_t len;
};

struct t_target_arg {
	const struct t_target_opts *o;
	struct t_target *t;
};

static void *t_app_main(void *arg)
{
	struct t_app *app = arg;
	const struct t_target_arg *ta = app->arg;

	app->arg = ta->o->app_arg;
	app->rep.status = ta->o->app(app);
	return NULL;
}

/* The target's acceptor: admits every link an initiator opens (T_MAX_LINKS at most). */
#define T_MAX_LINKS 64

struct t_acceptor {
	struct fab *fab;
	struct fab_link *link[T_MAX_LINKS];
	int nlinks;
	int stop; /* atomic */
	pthread_t th;
};

static void *t_acceptor_main(void *arg)
{
	struct t_acceptor *a = arg;
	uint8_t priv[FAB_PRIV_MAX];
	struct fab_link *link;
	size_t plen;

	/* bounded: the parent stops it before the target's own time limit */
	while (!__atomic_load_n(&a->stop, __ATOMIC_ACQUIRE)) {
		plen = sizeof(priv);
		if (fab_accept(a->fab, 0, 50, &link, priv, &plen) != 0)
			continue;
		if (a->nlinks == T_MAX_LINKS)
			T_FAIL("target: more than %d links", T_MAX_LINKS);
		a->link[a->nlinks++] = link;
		/* an initiator that already gave up makes this fail: its link is closed at quit */
		(void)fab_link_admit(link);
	}
	return NULL;
}

static void t_target_close(struct fab *fab, struct fab_mr **mr, int nreg, struct t_acceptor *acc)
{
	struct fab_link *link;
	uint8_t priv[FAB_PRIV_MAX];
	size_t plen;
	int ret;

	__atomic_store_n(&acc->stop, 1, __ATOMIC_RELEASE);
	T_ASSERT_OK(pthread_join(acc->th, NULL));
	for (int i = 0; i < acc->nlinks; i++) {
		ret = fab_link_close(acc->link[i]);
		if (ret != 0)
			T_FAIL("target: fab_link_close returned %d (%s)", ret, t_errname(ret));
	}
	/* links opened after the acceptor stopped were never accepted: take and close them */
	for (int i = 0; i < 64; i++) {
		plen = sizeof(priv);
		if (fab_accept(fab, 0, 0, &link, priv, &plen) != 0)
			break;
		ret = fab_link_close(link);
		if (ret != 0)
			T_FAIL("target: fab_link_close returned %d (%s)", ret, t_errname(ret));
	}
	for (int i = 0; i < nreg; i++)
		T_ASSERT_OK(fab_mr_dereg(mr[i]));
	fab_close(fab);
}

static int t_target_main(struct t_chan *ch, void *arg)
{
	const struct t_target_arg *ta = arg;
	const struct t_target_opts *o = ta->o;
	struct t_target *t = ta->t;
	struct fab_mr *mr[T_MAX_REG], *dead;
	struct t_app app = {.nreg = o->nreg, .arg = arg};
	static struct t_acceptor acc;
	pthread_t th;
	struct fab *fab;
	void *dead_buf;
	int64_t res;

	t_side_set_target(); /* the target listens on LOCO_TEST_ADDR_B */
	if (o->slow_write_ns != NULL)
		setenv("LOCO_TCP_SLOW_WRITE", o->slow_write_ns, 1);
	else
		unsetenv("LOCO_TCP_SLOW_WRITE");
	fab = t_fab_open(&o->attr);
	for (int i = 0; i < o->nreg; i++) {
		unsigned acc = o->reg[i].access;

		/* verbs requires local write for remote write and remote atomic */
		if (acc & (FAB_ACCESS_REMOTE_WRITE | FAB_ACCESS_REMOTE_ATOMIC))
			acc |= FAB_ACCESS_LOCAL_WRITE;
		mr[i] = t_mr_reg(fab, t->mem[i], o->reg[i].len, acc);
		t->reg[i] = (struct t_region){.addr = (uint64_t)(uintptr_t)t->mem[i],
		                              .len = o->reg[i].len,
		                              .rkey = mr[i]->rkey,
		                              .access = acc};
		app.base[i] = t->mem[i];
		app.len[i] = o->reg[i].len;
	}
	/* registered after the live regions, so that none of them reuses its key */
	dead_buf = t_alloc(4096);
	dead = t_mr_reg(fab, dead_buf, 4096,
	                FAB_ACCESS_LOCAL_WRITE | FAB_ACCESS_REMOTE_READ | FAB_ACCESS_REMOTE_WRITE |
	                    FAB_ACCESS_REMOTE_ATOMIC);
	t->dead_rkey = dead->rkey;
	t->dead_addr = (uint64_t)(uintptr_t)dead_buf;
	T_ASSERT_OK(fab_mr_dereg(dead));
	T_ASSERT_OK(fab_get_addr(fab, &t->addr));
	acc.fab = fab;
	T_ASSERT_OK(pthread_create(&acc.th, NULL, t_acceptor_main, &acc));
	if (o->app != NULL)
		T_ASSERT_OK(pthread_create(&th, NULL, t_app_main, &app));

	t_send(ch, &t->addr, sizeof(t->addr));
	t_send(ch, t->reg, sizeof(t->reg));
	t_send(ch, &t->dead_rkey, sizeof(t->dead_rkey));
	t_send(ch, &t->dead_addr, sizeof(t->dead_addr));

	/* the application's main thread does nothing but wait for commands */
	for (;;) {
		struct t_cmd cmd;
		uint8_t *want;

		t_recv(ch, &cmd, sizeof(cmd), -1);
		switch (cmd.op) {
		case T_CMD_CHECK:
			want = malloc(cmd.len ? cmd.len : 1);
			T_ASSERT(want != NULL);
			t_recv(ch, want, cmd.len, T_IO_TIMEOUT);
			res = -1;
			for (uint64_t i = 0; i < cmd.len; i++) {
				if (t->mem[cmd.reg][cmd.off + i] != want[i]) {
					res = (int64_t)i;
					break;
				}
			}
			free(want);
			t_send(ch, &res, sizeof(res));
			break;
		case T_CMD_QUIT:
			__atomic_store_n(&app.stop, 1, __ATOMIC_RELEASE);
			if (o->app != NULL)
				T_ASSERT_OK(pthread_join(th, NULL));
			t_target_close(fab, mr, o->nreg, &acc);
			t_free(dead_buf, 4096);
			t_send(ch, &app.rep, sizeof(app.rep));
			return T_EXIT_PASS;
		default:
			T_FAIL("target: unknown command %u", cmd.op);
		}
	}
}

void t_target_spawn(const struct t_target_opts *o, struct t_target *t)
{
	struct t_target_arg ta = {.o = o, .t = t};

	T_ASSERT(o->nreg >= 0 && o->nreg <= T_MAX_REG);
	T_ASSERT(o->guard % 64 == 0);
	memset(t, 0, sizeof(*t));
	t->nreg = o->nreg;
	t->guard = o->guard;
	for (int i = 0; i < o->nreg; i++) {
		uint8_t *map = t_alloc_shared(o->reg[i].len + 2 * o->guard);

		memset(map, T_CANARY, o->guard);
		memset(map + o->guard + o->reg[i].len, T_CANARY, o->guard);
		t->mem[i] = map + o->guard;
	}
	t->pid = t_spawn(t_target_main, &ta, &t->ch);
	t_recv(&t->ch, &t->addr, sizeof(t->addr), T_IO_TIMEOUT);
	t_recv(&t->ch, t->reg, sizeof(t->reg), T_IO_TIMEOUT);
	t_recv(&t->ch, &t->dead_rkey, sizeof(t->dead_rkey), T_IO_TIMEOUT);
	t_recv(&t->ch, &t->dead_addr, sizeof(t->dead_addr), T_IO_TIMEOUT);
	for (int i = 0; i < o->nreg; i++)
		T_ASSERT_EQX(t->reg[i].addr, (uintptr_t)t->mem[i]);
}

int64_t t_target_check(struct t_target *t, int reg, size_t off, const void *want, size_t len)
{
	struct t_cmd cmd = {.op = T_CMD_CHECK, .reg = (uint32_t)reg, .off = off, .len = len};
	int64_t res;

	T_ASSERT(reg >= 0 && reg < t->nreg && off + len <= t->reg[reg].len);
	t_send(&t->ch, &cmd, sizeof(cmd));
	t_send(&t->ch, want, len);
	t_recv(&t->ch, &res, sizeof(res), T_IO_TIMEOUT);
	return res;
}

bool t_guard_intact(const struct t_target *t, int reg)
{
	const uint8_t *lo = t->mem[reg] - t->guard, *hi = t->mem[reg] + t->reg[reg].len;

	for (size_t i = 0; i < t->guard; i++) {
		if (lo[i] != T_CANARY || hi[i] != T_CANARY) {
			fprintf(stderr, "%s: canary of region %d changed at %s+%zu\n",
			        t_test_name(), reg, lo[i] != T_CANARY ? "start-guard" : "end", i);
			return false;
		}
	}
	return true;
}

void t_target_quit(struct t_target *t, struct t_report *rep)
{
	struct t_cmd cmd = {.op = T_CMD_QUIT};
	struct t_report r;
	int st;

	t_send(&t->ch, &cmd, sizeof(cmd));
	t_recv(&t->ch, &r, sizeof(r), T_IO_TIMEOUT);
	st = t_reap(t->pid, 10000);
	t_chan_close(&t->ch);
	if (st != 0)
		T_FAIL("target %d exited with status %d", (int)t->pid, st);
	t->pid = 0;
	if (rep != NULL)
		*rep = r;
}

void t_target_kill(struct t_target *t)
{
	if (t->pid > 0)
		t_kill(t->pid);
	t_chan_close(&t->ch);
	t->pid = 0;
}

void t_target_free(struct t_target *t)
{
	for (int i = 0; i < t->nreg; i++) {
		if (t->mem[i] != NULL)
			t_free(t->mem[i] - t->guard, t->reg[i].len + 2 * t->guard);
		t->mem[i] = NULL;
	}
}
