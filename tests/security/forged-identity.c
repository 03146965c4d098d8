/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * forged-identity.c -- a stranger cannot plant a data link in a member's
 * name (issue 10).
 *
 * Two nodes form a cluster (node 2 joins node 1). A stranger learns node
 * 2's {id, incarnation} as anyone can: it connects to node 2's control
 * port, sends a HELLO and reads the CHALLENGE. It then opens data links
 * to node 1 claiming node 2: with a well-formed proof under a key it made
 * up, with the pre-step-6 private data {node, inc}, and with a replay of
 * the very private data node 2 used for its own link (captured in this
 * process from both nodes' sessions: what an on-path observer would have
 * recorded). Expected: each connect is refused, had one connected it
 * serves nothing, node 1's region is unchanged, node 1 logs each
 * refusal, and the real node 2's link still carries data: after the
 * attack the nodes write and read each other's regions.
 */
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ctrl_wire.h"
#include "manager.h"
#include "sec.h"

#define LEN 4096

/* challenge -- connect to @ctrl as node 9, send HELLO, read the CHALLENGE's sender. */
static void challenge(const char *ctrl, uint32_t *node, uint64_t *inc)
{
	struct lc_msg *msg = calloc(1, sizeof(*msg));
	uint8_t buf[4096];
	struct fab_addr fa;
	size_t got = 0;
	long n;
	int fd;

	T_ASSERT(msg != NULL);
	msg->type = LC_MSG_HELLO;
	msg->src_node = 9;
	msg->src_inc = 1;
	sec_random(msg->u.hello.nonce, LC_NONCE_LEN);
	snprintf(msg->u.hello.fabric, sizeof(msg->u.hello.fabric), "%s", t_provider());
	msg->u.hello.self.node = 9;
	msg->u.hello.self.inc = 1;
	snprintf(msg->u.hello.self.ctrl_addr, LC_ADDR_MAX, "127.0.0.1:9");
	snprintf(msg->u.hello.self.fab_addr, LC_ADDR_MAX, "127.0.0.1:9");
	n = lc_ctrl_encode(msg, buf, sizeof(buf));
	T_ASSERT(n > 0);
	T_ASSERT_OK(fab_addr_parse(ctrl, 0, &fa));
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	T_ASSERT(fd >= 0);
	T_ASSERT(connect(fd, (struct sockaddr *)&fa.ss, fa.len) == 0);
	T_ASSERT(send(fd, buf, (size_t)n, MSG_NOSIGNAL) == n);
	for (int64_t end = t_now_ms() + 3000; t_now_ms() < end;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		ssize_t r;

		if (poll(&p, 1, 100) <= 0)
			continue;
		r = recv(fd, buf + got, sizeof(buf) - got, 0);
		T_ASSERT(r > 0);
		got += (size_t)r;
		n = lc_ctrl_peek(buf, got);
		if (n > 0 && (size_t)n <= got)
			break;
	}
	close(fd);
	n = lc_ctrl_peek(buf, got);
	T_ASSERT(n > 0 && (size_t)n <= got);
	T_ASSERT_OK(lc_ctrl_decode(buf, (size_t)n, msg));
	T_ASSERT_EQ(msg->type, LC_MSG_CHALLENGE);
	*node = msg->src_node;
	*inc = msg->src_inc;
	free(msg);
}

struct joiner {
	loco_channel_t *ch;
	int ret;
};

static void *join_main(void *arg)
{
	struct joiner *j = arg;

	j->ret = loco_channel_join(j->ch, 20000000000ll);
	return NULL;
}

/* round_trip -- @from writes 64 bytes into @to's region at node @node, then reads them back. */
static void round_trip(loco_manager_t *m, struct sec_region *from, struct sec_region *to,
                       uint32_t node, uint64_t seed)
{
	uint8_t *src = loco_region_ptr(from->r), want[64];
	loco_ack_key_t *ack;
	loco_rref_t rr;

	T_ASSERT_OK(loco_ack_key_create(m, &ack));
	T_ASSERT_OK(loco_region_remote(from->r, node, &rr));
	t_fill(want, sizeof(want), seed);
	memcpy(src, want, sizeof(want));
	T_ASSERT_OK(loco_write(from->r, 0, &rr, 128, sizeof(want), ack));
	T_ASSERT_OK(loco_ack_wait(ack, 5000000000ll));
	T_ASSERT(t_mem_equal((uint8_t *)loco_region_ptr(to->r) + 128, want, sizeof(want),
	                     "the written bytes at the target"));
	memset(src + 256, 0, sizeof(want));
	T_ASSERT_OK(loco_read(from->r, 256, &rr, 128, sizeof(want), ack));
	T_ASSERT_OK(loco_ack_wait(ack, 5000000000ll));
	T_ASSERT(t_mem_equal(src + 256, want, sizeof(want), "the bytes read back"));
	loco_ack_key_destroy(ack);
}

int main(void)
{
	struct {
		uint32_t node;
		uint64_t inc;
	} __attribute__((packed)) old;
	struct sec_stranger st;
	struct sec_region s1, s2;
	struct joiner j;
	pthread_t t;
	loco_manager_t *m1, *m2;
	uint32_t node;
	uint64_t inc;
	int served = 0, connected = 0, ret;
	size_t leaked = 0;
	unsigned logged;

	t_init("forged-identity", 60);
	sec_log_start();
	m1 = sec_node(1, NULL, "forged-identity secret");
	m2 = sec_node(2, loco_manager_addr(m1), "forged-identity secret");
	sec_region(m1, "fi", 2, LEN, 0x11, &s1);
	sec_region(m2, "fi", 2, LEN, 0x22, &s2);
	j.ch = s2.ch;
	T_ASSERT(pthread_create(&t, NULL, join_main, &j) == 0);
	T_ASSERT_OK(loco_channel_join(s1.ch, 20000000000ll));
	pthread_join(t, NULL);
	T_ASSERT_OK(j.ret);
	round_trip(m1, &s1, &s2, 2, 0xa1); /* the cluster works before the attack */
	t_fill(loco_region_ptr(s1.r), LEN, 0x11);
	t_fill(loco_region_ptr(s2.r), LEN, 0x22);

	/* what any connector learns: node 2's id and incarnation, in clear */
	challenge(loco_manager_addr(m2), &node, &inc);
	printf("the CHALLENGE of %s names node %u incarnation %llx\n", loco_manager_addr(m2), node,
	       (unsigned long long)inc);
	T_ASSERT_EQ(node, 2);
	st = (struct sec_stranger){0};
	sec_stranger_open(&st);

	old.node = node;
	old.inc = inc;
	connected +=
	    sec_attempt(&st, sec_fab_addr(m1), &s1, "pre-step-6 private data claiming node 2", &old,
	                sizeof(old), &served, &leaked) == 0;
#ifdef LC_LINK_PRIV_LEN
	{
		struct lc_link_proof proof = {.from_node = node, .from_inc = inc, .to_node = 1};
		uint8_t priv[LC_LINK_PRIV_LEN];
		uint64_t seen;

		/* a well-formed proof under a made-up key */
		proof.to_inc = sec_node_inc(m1);
		sec_random(proof.key, sizeof(proof.key));
		lc_link_priv_make(&proof, 1u << 20, priv);
		connected +=
		    sec_attempt(&st, sec_fab_addr(m1), &s1, "a made-up key claiming node 2", priv,
		                sizeof(priv), &served, &leaked) == 0;
		/* node 2's own private data, replayed: its key, the counter node 1 admitted */
		pthread_mutex_lock(&m2->lock);
		T_ASSERT(lc_member_find(m2, 1) != NULL && lc_member_find(m2, 1)->conn != NULL);
		memcpy(proof.key, lc_member_find(m2, 1)->conn->link_key, sizeof(proof.key));
		pthread_mutex_unlock(&m2->lock);
		pthread_mutex_lock(&m1->lock);
		T_ASSERT(lc_member_find(m1, 2) != NULL && lc_member_find(m1, 2)->conn != NULL);
		seen = lc_member_find(m1, 2)->conn->link_ctr_seen;
		pthread_mutex_unlock(&m1->lock);
		T_ASSERT(seen > 0);
		lc_link_priv_make(&proof, seen, priv);
		connected +=
		    sec_attempt(&st, sec_fab_addr(m1), &s1, "node 2's private data, replayed", priv,
		                sizeof(priv), &served, &leaked) == 0;
		for (int64_t end = t_now_ms() + 2000;
		     sec_log_count("replayed private data") < 1 && t_now_ms() < end;)
			t_sleep_ms(10);
		T_ASSERT(sec_log_count("replayed private data") >= 1);
	}
#endif
	/* nothing served, node 1's memory unchanged */
	T_ASSERT_EQ(served, 0);
	T_ASSERT_EQ(leaked, 0);
	T_ASSERT(sec_region_intact(&s1));
	T_ASSERT(sec_region_intact(&s2));
	/* the real member's link still carries data, both ways */
	round_trip(m1, &s1, &s2, 2, 0xb1);
	round_trip(m2, &s2, &s1, 1, 0xb2);
	printf("node 1 <-> node 2 round trips after the attack: ok\n");
	/* refused, and said so */
	T_ASSERT_EQ(connected, 0);
	logged = sec_log_count("refused a data link from ");
	printf("refusals logged: %u\n", logged);
	T_ASSERT(logged >= 3);

	sec_stranger_close(&st);
	sec_region_free(&s2);
	sec_region_free(&s1);
	loco_fini(m2);
	loco_fini(m1);
	(void)ret;
	printf("PASS\n");
	return T_EXIT_PASS;
}
