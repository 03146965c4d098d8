/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * stranger-data.c -- a stranger without the cluster secret cannot use a
 * node's data port (issue 10).
 *
 * A node (with a secret) holds a region of known bytes. A stranger opens
 * its own fabric of the same provider and connects to the node's data
 * address, knowing the region's address and remote key (the worst case
 * of a scan), with private data it cannot make valid: a proof with a
 * random tag claiming another node, claiming the node itself (its self
 * link), the pre-step-6 format {node, inc}, and none. Expected: every
 * connect is refused (-ECONNREFUSED, -ETIMEDOUT or -ECONNRESET); had one
 * connected, none of its READ, WRITE, FAA succeeds; the region is
 * unchanged; the node logs each refusal with the stranger's real address.
 * On tcp, a raw connection speaking the wire without the secret (frames
 * before any HELLO, and a HELLO with a random proof followed by READ and
 * WRITE frames) gets no byte of the region and changes none.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sec.h"
#include "tcp/wire.h"

#define LEN  4096
#define SEED 0x5ec2e7

/* raw_frames -- tcp: speak the wire on a plain socket; returns READ_RESP payload bytes received. */
static size_t raw_frames(const char *addr, const struct sec_region *s, int with_hello)
{
	uint8_t out[TCP_HDR_LEN + TCP_HELLO_LEN + 3 * TCP_HDR_LEN + 64], in[8192];
	struct tcp_hello h = {.magic = TCP_MAGIC, .version = TCP_VERSION, .sq_depth = 16};
	struct tcp_frame f;
	struct fab_addr fa;
	size_t n = 0, got = 0, resp = 0;
	int fd;

	T_ASSERT_OK(fab_addr_parse(addr, 0, &fa));
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	T_ASSERT(fd >= 0);
	if (connect(fd, (struct sockaddr *)&fa.ss, fa.len) != 0) {
		close(fd);
		return 0; /* refused outright: nothing served */
	}
	if (with_hello) {
		h.priv_len = 40;
		h.read_window = 1u << 20;
		sec_random(h.priv, 40);
		h.priv[0] = 1; /* a well-formed proof's header, a random tag */
		h.priv[1] = h.priv[2] = h.priv[3] = 0;
		f = (struct tcp_frame){.type = TCP_F_HELLO, .len = TCP_HELLO_LEN};
		tcp_wire_encode(&f, out);
		tcp_hello_encode(&h, out + TCP_HDR_LEN);
		n = TCP_HDR_LEN + TCP_HELLO_LEN;
	}
	f = (struct tcp_frame){.type = TCP_F_READ,
	                       .flags = TCP_FL_FIRST | TCP_FL_LAST | TCP_FL_ACKREQ,
	                       .psn = 0,
	                       .key = s->rkey,
	                       .addr = s->addr,
	                       .a = 64};
	tcp_wire_encode(&f, out + n);
	n += TCP_HDR_LEN;
	f = (struct tcp_frame){.type = TCP_F_WRITE,
	                       .flags = TCP_FL_FIRST | TCP_FL_LAST | TCP_FL_ACKREQ,
	                       .len = 64,
	                       .psn = 1,
	                       .key = s->rkey,
	                       .addr = s->addr,
	                       .a = 64};
	tcp_wire_encode(&f, out + n);
	n += TCP_HDR_LEN;
	memset(out + n, 0xee, 64);
	n += 64;
	if (send(fd, out, n, MSG_NOSIGNAL) < 0) {
		close(fd);
		return 0;
	}
	/* read what comes back for up to 1.5 s */
	for (int64_t end = t_now_ms() + 1500; t_now_ms() < end && got < sizeof(in);) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		ssize_t r;

		if (poll(&p, 1, 100) <= 0)
			continue;
		r = recv(fd, in + got, sizeof(in) - got, 0);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	close(fd);
	/* count READ_RESP payload: the frames after the HELLO_ACK */
	for (size_t off = 0; off + TCP_HDR_LEN <= got;) {
		long fl = tcp_wire_decode(in + off, got - off, &f);

		if (fl <= 0)
			break;
		if (f.type == TCP_F_READ_RESP)
			resp += f.len;
		off += (size_t)fl;
	}
	return resp;
}

int main(void)
{
	struct {
		uint8_t version, pad[3];
		uint32_t node;
		uint64_t inc, counter;
		uint8_t tag[16];
	} __attribute__((packed)) forged;
	struct {
		uint32_t node;
		uint64_t inc;
	} __attribute__((packed)) old = {.node = 2, .inc = 1};
	struct sec_stranger st;
	struct sec_region s;
	loco_manager_t *m;
	const char *addr;
	int served = 0, connected = 0, refused_logs, ret;
	size_t leaked = 0;
	char want_addr[80];

	t_init("stranger-data", 60);
	sec_log_start();
	m = sec_node(1, NULL, "stranger-data secret");
	sec_region(m, "sec", 1, LEN, SEED, &s);
	addr = sec_fab_addr(m);
	sec_stranger_open(&st);
	printf("node 1 data address %s; region at 0x%llx rkey 0x%x\n", addr,
	       (unsigned long long)s.addr, s.rkey);

	sec_random(&forged, sizeof(forged));
	forged.version = 1;
	memset(forged.pad, 0, 3);
	forged.node = 2;
	forged.inc = 1;
	ret = sec_attempt(&st, addr, &s, "random tag claiming node 2", &forged, sizeof(forged),
	                  &served, &leaked);
	connected += ret == 0;
	forged.node = 1;
	forged.inc = sec_node_inc(m); /* the node's own identity: its self link */
	ret = sec_attempt(&st, addr, &s, "random tag claiming node 1 itself", &forged,
	                  sizeof(forged), &served, &leaked);
	connected += ret == 0;
	ret = sec_attempt(&st, addr, &s, "pre-step-6 private data {2, 1}", &old, sizeof(old),
	                  &served, &leaked);
	connected += ret == 0;
	ret = sec_attempt(&st, addr, &s, "no private data", NULL, 0, &served, &leaked);
	connected += ret == 0;

	if (strcmp(t_provider(), "tcp") == 0) {
		size_t r1 = raw_frames(addr, &s, 0), r2 = raw_frames(addr, &s, 1);

		printf("  raw tcp: %zu READ_RESP bytes without HELLO, %zu after a forged HELLO\n",
		       r1, r2);
		T_ASSERT_EQ(r1, 0);
		T_ASSERT_EQ(r2, 0);
	}
	/* what matters most: nothing served, nothing read, nothing changed */
	T_ASSERT_EQ(served, 0);
	T_ASSERT_EQ(leaked, 0);
	T_ASSERT(sec_region_intact(&s));
	/* and the links were refused, not served and dropped */
	T_ASSERT_EQ(connected, 0);
	/* the node logged the refusals with the stranger's real address */
	snprintf(want_addr, sizeof(want_addr), "refused a data link from %.*s",
	         (int)strcspn(t_listen_addr(T_SIDE_B), ":"), t_listen_addr(T_SIDE_B));
	for (int64_t end = t_now_ms() + 2000;
	     sec_log_count("refused a data link from ") < 4 && t_now_ms() < end;)
		t_sleep_ms(10);
	refused_logs = (int)sec_log_count(want_addr);
	printf("refusals logged with the real address: %d\n", refused_logs);
	T_ASSERT(refused_logs >= 4);

	sec_stranger_close(&st);
	sec_region_free(&s);
	loco_fini(m);
	printf("PASS\n");
	return T_EXIT_PASS;
}
