/* SPDX-License-Identifier: BSD-2-Clause */
/* gen-ctrl-corpus.c -- write the seed corpus of fuzz-ctrl-wire (corpus/ctrl-wire/) */
/*
 * Run once after a change of the control-plane wire format, then commit
 * the files:
 *   build/tests/fuzz/fuzz-gen-ctrl-corpus tests/fuzz/corpus/ctrl-wire
 * Seeds: every message type with empty/zero fields ("-min"), with every
 * string at its maximum and every array full ("-max"), and with ordinary
 * values; a join session as one stream; and malformed messages, one per
 * kind of refusal (each after a good message, so the walk reaches it).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrl_wire.h"

static const char *outdir;
static uint8_t buf[4 * LC_CTRL_MAX_MSG];
static size_t used;
static struct lc_msg m; /* large: not on the stack */

/* put -- append lc_ctrl_encode(&m) to buf; returns the offset of the message. */
static size_t put(void)
{
	size_t at = used;
	long n = lc_ctrl_encode(&m, buf + used, sizeof(buf) - used);

	if (n < 0) {
		fprintf(stderr, "gen-ctrl-corpus: encode of a %s failed: %ld\n",
		        lc_msg_type_str(m.type), n);
		exit(1);
	}
	used += (size_t)n;
	return at;
}

/* emit -- write the first @len bytes of buf (all when @len is 0) to @name, then clear. */
static void emit(const char *name, size_t len)
{
	char path[4096];
	FILE *fp;

	if (len == 0)
		len = used;
	snprintf(path, sizeof(path), "%s/%s", outdir, name);
	fp = fopen(path, "wb");
	if (fp == NULL || fwrite(buf, 1, len, fp) != len || fclose(fp) != 0) {
		perror(path);
		exit(1);
	}
	used = 0;
}

static void set_le(uint8_t *p, uint64_t v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* fill_str -- @len printable bytes depending on @seed, then NUL. */
static void fill_str(char *dst, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		dst[i] = (char)('!' + (seed + i) % 94);
	dst[len] = '\0';
}

static void member(struct lc_member_info *mi, uint32_t node, int max)
{
	memset(mi, 0, sizeof(*mi));
	mi->node = node;
	mi->inc = 0x100000000ull * node + 7;
	if (max) {
		fill_str(mi->ctrl_addr, LC_ADDR_MAX, node);
		fill_str(mi->fab_addr, LC_ADDR_MAX, node + 1);
	} else {
		snprintf(mi->ctrl_addr, sizeof(mi->ctrl_addr), "10.0.0.%u:7000", node % 256);
		snprintf(mi->fab_addr, sizeof(mi->fab_addr), "10.0.1.%u:7001", node % 256);
	}
}

static void region(struct lc_region_info *ri, unsigned i, int max)
{
	memset(ri, 0, sizeof(*ri));
	if (max)
		fill_str(ri->name, LC_NAME_MAX, i);
	else
		snprintf(ri->name, sizeof(ri->name), "sst/row%u", i);
	ri->addr = 0x7f0000000000ull + 0x10000ull * i;
	ri->len = 4096;
	ri->rkey = 0x10000u + i;
	ri->access = 7;
}

/* msg -- set m to a message of @type: 0 empty, 1 ordinary, 2 widest. */
static void msg(unsigned type, int shape)
{
	memset(&m, 0, sizeof(m));
	m.type = (uint16_t)type;
	if (shape == 0)
		return;
	m.src_node = 3;
	m.src_inc = 0x0000000300000001ull;
	switch (type) {
	case LC_MSG_HELLO:
		memset(m.u.hello.nonce, 0x4e, LC_NONCE_LEN);
		m.u.hello.flags = LC_HELLO_JOIN;
		if (shape == 2)
			fill_str(m.u.hello.fabric, LC_FABRIC_MAX, 0);
		else
			strcpy(m.u.hello.fabric, "tcp");
		member(&m.u.hello.self, 3, shape == 2);
		break;
	case LC_MSG_CHALLENGE:
		memset(m.u.challenge.nonce, 0x6e, LC_NONCE_LEN);
		memset(m.u.challenge.mac, 0x6d, LC_MAC_LEN);
		break;
	case LC_MSG_AUTH:
		memset(m.u.auth.mac, 0x4d, LC_MAC_LEN);
		break;
	case LC_MSG_WELCOME:
		m.u.welcome.n = shape == 2 ? LC_MAX_MEMBERS : 3;
		for (uint32_t i = 0; i < m.u.welcome.n; i++)
			member(&m.u.welcome.m[i], i + 1, shape == 2);
		break;
	case LC_MSG_REFUSE:
		m.u.refuse.err = 13;
		if (shape == 2)
			fill_str(m.u.refuse.reason, LC_NAME_MAX, 0);
		else
			strcpy(m.u.refuse.reason, "bad proof of the cluster secret");
		break;
	case LC_MSG_MEMBER_JOIN:
		member(&m.u.member_join, 4, shape == 2);
		break;
	case LC_MSG_MEMBER_LEAVE:
		m.u.member_leave.node = 2;
		m.u.member_leave.inc = 0x0000000200000001ull;
		m.u.member_leave.reason = LC_LEAVE_FAILED;
		break;
	case LC_MSG_HEARTBEAT:
		m.u.heartbeat.seq = 12345;
		break;
	case LC_MSG_CHAN:
		if (shape == 2)
			fill_str(m.u.chan.name, LC_NAME_MAX, 0);
		else
			strcpy(m.u.chan.name, "kv/shard/sst");
		m.u.chan.flags = LC_CHAN_REPLY;
		m.u.chan.nodes = 4;
		m.u.chan.n = shape == 2 ? LC_MAX_REGIONS : 3;
		/* the widest: the last page of the longest announcement */
		m.u.chan.first = shape == 2 ? LC_CHAN_ENTRIES_MAX - LC_MAX_REGIONS : 0;
		m.u.chan.total = shape == 2 ? LC_CHAN_ENTRIES_MAX : 3;
		for (uint32_t i = 0; i < m.u.chan.n; i++)
			region(&m.u.chan.r[i], i, shape == 2);
		if (shape == 1) { /* an agreed parameter (loco_object_agree): name and value only */
			memset(&m.u.chan.r[2], 0, sizeof(m.u.chan.r[2]));
			strcpy(m.u.chan.r[2].name, "sst/row_size");
			m.u.chan.r[2].addr = 16;
			m.u.chan.r[2].access = LC_REGION_PARAM;
		}
		break;
	case LC_MSG_CHAN_LEAVE:
		if (shape == 2)
			fill_str(m.u.chan_leave.name, LC_NAME_MAX, 0);
		else
			strcpy(m.u.chan_leave.name, "kv/shard/sst");
		break;
	case LC_MSG_VC:
		m.u.vc.kind = 4; /* ACCEPT */
		m.u.vc.view = 5;
		m.u.vc.ballot = 0x0000000300000001ull;
		m.u.vc.abal = 0x0000000200000001ull;
		m.u.vc.node = 2;
		m.u.vc.inc = 0x0000000200000001ull;
		m.u.vc.flag = 1;
		m.u.vc.n = shape == 2 ? LC_MAX_MEMBERS : 3;
		for (uint32_t i = 0; i < m.u.vc.n; i++)
			member(&m.u.vc.m[i], i + 1, shape == 2);
		break;
	case LC_MSG_OBJ:
		if (shape == 2) {
			fill_str(m.u.obj.chan, LC_NAME_MAX, 0);
			fill_str(m.u.obj.obj, LC_NAME_MAX, 5);
		} else {
			strcpy(m.u.obj.chan, "kv/shard");
			strcpy(m.u.obj.obj, "rpc");
		}
		m.u.obj.len = shape == 2 ? LC_OBJ_MSG_MAX : 24;
		for (uint32_t i = 0; i < m.u.obj.len; i++)
			m.u.obj.data[i] = (uint8_t)(i * 13);
		break;
	default:
		break;
	}
}

/* lower -- "MEMBER_JOIN" as "member-join". */
static void lower(char *dst, size_t size, const char *src)
{
	size_t i;

	for (i = 0; i + 1 < size && src[i]; i++)
		dst[i] = src[i] == '_' ? '-' : (char)(src[i] | 0x20);
	dst[i] = '\0';
}

int main(int argc, char **argv)
{
	static const char *const shapes[] = {"min", "", "max"};
	size_t at;

	if (argc != 2) {
		fprintf(stderr, "usage: %s OUTDIR\n", argv[0]);
		return 1;
	}
	outdir = argv[1];

	/* every type, empty, ordinary and widest (when that differs from ordinary) */
	for (unsigned type = 1; type < LC_MSG_MAX_; type++) {
		static uint8_t ordinary[LC_CTRL_MAX_MSG];
		size_t ordinary_len = 0;

		for (int s = 0; s < 3; s++) {
			char name[64], t[32];

			lower(t, sizeof(t), lc_msg_type_str(type));
			snprintf(name, sizeof(name), "%s%s%s", t, s == 1 ? "" : "-", shapes[s]);
			msg(type, s);
			put();
			if (s == 1) {
				memcpy(ordinary, buf, used);
				ordinary_len = used;
			} else if (s == 2 && used == ordinary_len &&
			           memcmp(buf, ordinary, used) == 0) {
				used = 0;
				continue;
			}
			emit(name, 0);
		}
	}

	/* a join as the acceptor sees it, then the same stream cut short */
	for (int cut = 0; cut < 3; cut++) {
		const unsigned session[] = {
		    LC_MSG_HELLO,        LC_MSG_AUTH, LC_MSG_HEARTBEAT,  LC_MSG_CHAN,
		    LC_MSG_CHAN,         LC_MSG_OBJ,  LC_MSG_CHAN_LEAVE, LC_MSG_HEARTBEAT,
		    LC_MSG_MEMBER_LEAVE, LC_MSG_VC,   LC_MSG_LEAVE,
		};

		for (size_t i = 0; i < sizeof(session) / sizeof(session[0]); i++) {
			msg(session[i], 1);
			put();
		}
		emit(cut == 0   ? "session"
		     : cut == 1 ? "session-cut-in-length"
		                : "session-cut",
		     cut == 0   ? 0
		     : cut == 1 ? used - LC_CTRL_HDR_LEN + 2
		                : used - 7);
	}
	msg(LC_MSG_WELCOME, 2);
	put();
	emit("welcome-max-incomplete", 1000);

	/* malformed messages, each after a good one */
	msg(LC_MSG_HEARTBEAT, 1);
	put();
	at = put();
	set_le(buf + at + 4, LC_CTRL_VERSION + 1, 2);
	emit("bad-version", 0);

	msg(LC_MSG_HEARTBEAT, 1);
	put();
	at = put();
	buf[at + 12] = 1;
	emit("bad-reserved", 0);

	msg(LC_MSG_HEARTBEAT, 1);
	put();
	at = put();
	set_le(buf + at + 6, LC_MSG_MAX_, 2);
	emit("bad-type", 0);

	msg(LC_MSG_HEARTBEAT, 1);
	put();
	at = put();
	set_le(buf + at, LC_CTRL_HDR_LEN - 1, 4);
	emit("bad-length-short", 0);

	msg(LC_MSG_HEARTBEAT, 1);
	put();
	at = put();
	set_le(buf + at, LC_CTRL_MAX_MSG + 1, 4);
	emit("bad-length-long", 0);

	/* the trailing byte is counted in the length */
	msg(LC_MSG_LEAVE, 1);
	at = put();
	buf[used++] = 0;
	set_le(buf + at, used - at, 4);
	emit("bad-trailing-byte", 0);

	/* the body ends inside the last field */
	msg(LC_MSG_MEMBER_LEAVE, 1);
	at = put();
	used -= 3;
	set_le(buf + at, used - at, 4);
	emit("bad-body-short", 0);

	/* a NUL inside CHAN_LEAVE's name */
	msg(LC_MSG_CHAN_LEAVE, 1);
	at = put();
	buf[at + LC_CTRL_HDR_LEN + 2 + 2] = 0;
	emit("bad-string-nul", 0);

	/* CHAN_LEAVE's name one byte over LC_NAME_MAX */
	msg(LC_MSG_CHAN_LEAVE, 2);
	at = put();
	set_le(buf + at + LC_CTRL_HDR_LEN, LC_NAME_MAX + 1, 2);
	buf[used++] = 'x';
	set_le(buf + at, used - at, 4);
	emit("bad-string-long", 0);

	/* WELCOME's count says one member more than there are */
	msg(LC_MSG_WELCOME, 1);
	at = put();
	set_le(buf + at + LC_CTRL_HDR_LEN, m.u.welcome.n + 1, 4);
	emit("bad-count-missing-entry", 0);

	/* CHAN's count over LC_MAX_REGIONS */
	msg(LC_MSG_CHAN, 1);
	at = put();
	set_le(buf + at + LC_CTRL_HDR_LEN + 2 + strlen(m.u.chan.name) + 16, LC_MAX_REGIONS + 1, 4);
	emit("bad-count-over-max", 0);

	/* an announcement of 150 entries in three pages (first 0, 64, 128; total 150) */
	for (uint32_t first = 0; first < 150; first += LC_MAX_REGIONS) {
		msg(LC_MSG_CHAN, 1);
		m.u.chan.first = first;
		m.u.chan.total = 150;
		m.u.chan.n = 150 - first < LC_MAX_REGIONS ? 150 - first : LC_MAX_REGIONS;
		for (uint32_t i = 0; i < m.u.chan.n; i++)
			region(&m.u.chan.r[i], first + i, 0);
		put();
	}
	emit("chan-pages", 0);

	/* a CHAN page that runs past its announcement's total (first 2 + 3 entries > 4) */
	msg(LC_MSG_CHAN, 1);
	at = put();
	set_le(buf + at + LC_CTRL_HDR_LEN + 2 + strlen(m.u.chan.name) + 8, 2, 4);
	set_le(buf + at + LC_CTRL_HDR_LEN + 2 + strlen(m.u.chan.name) + 12, 4, 4);
	emit("bad-chan-page-past-total", 0);

	/* a CHAN announcement over LC_CHAN_ENTRIES_MAX */
	msg(LC_MSG_CHAN, 1);
	at = put();
	set_le(buf + at + LC_CTRL_HDR_LEN + 2 + strlen(m.u.chan.name) + 12, LC_CHAN_ENTRIES_MAX + 1,
	       4);
	emit("bad-chan-total-over-max", 0);

	/* OBJ's payload length over LC_OBJ_MSG_MAX (as many bytes follow) */
	msg(LC_MSG_OBJ, 2);
	at = put();
	set_le(buf + used - LC_OBJ_MSG_MAX - 4, LC_OBJ_MSG_MAX + 1, 4);
	buf[used++] = 'x';
	set_le(buf + at, used - at, 4);
	emit("bad-obj-len-over-max", 0);

	/* OBJ's payload length says more bytes than follow */
	msg(LC_MSG_OBJ, 1);
	at = put();
	set_le(buf + used - m.u.obj.len - 4, m.u.obj.len + 1, 4);
	emit("bad-obj-len-missing-byte", 0);
	return 0;
}
