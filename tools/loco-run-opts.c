/* SPDX-License-Identifier: BSD-2-Clause */
/* loco-run-opts.c -- the launcher's command line, message times and program lookup (loco-run.h). */
#include "fabric/names.h" /* the providers of this build: one list with liboco's */
#include "loco-run.h"
#include "log_time.h"

static enum lc_log_time lr_time_kind = LC_LOG_TIME_MONO; /* written once by lr_time_init() */
static struct timespec lr_time_start;                    /* CLOCK_MONOTONIC at lr_time_init() */

/* lr_time_init -- read LOCO_LOG_TIME (mono, wall, none; default mono) and note the start. */
void lr_time_init(void)
{
	clock_gettime(CLOCK_MONOTONIC, &lr_time_start);
	lr_time_kind = lc_log_time_parse(getenv("LOCO_LOG_TIME"));
}

/* lr_time_str -- the time of a message, as liboco writes it on its log lines (log_time.h). */
void lr_time_str(char *buf, size_t len)
{
	lc_log_time_str(lr_time_kind, &lr_time_start, buf, len);
}

/* lr_usage -- the synopsis, to @f. */
void lr_usage(FILE *f)
{
	fputs("usage: loco-run -n N [--fabric NAME] [--timeout SEC] [--join ADDR] [--first-id K]\n"
	      "                [--hosts IP[,IP...]] [--no-prefix] [--keep-going] [--bind]\n"
	      "                [--control PATH] [--] PROGRAM [ARGS...]\n"
	      "       loco-run --ctl PATH add [K] | restart ID | kill ID [SIG] | list\n"
	      "Start N copies of PROGRAM as local LOCO nodes; see loco-run(1).\n",
	      f);
}

/* parse_ulong -- a decimal in [@min, @max] with nothing after it; 0 or -EINVAL. */
static int parse_ulong(const char *s, unsigned long min, unsigned long max, unsigned long *out)
{
	unsigned long v;
	char *end;

	if (s[0] < '0' || s[0] > '9')
		return -EINVAL; /* no sign, no blanks: strtoul() would take "-1" */
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno != 0 || *end != '\0' || v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

/* parse_timeout -- seconds, fractions allowed, 0 = none; 0 or -EINVAL. */
static int parse_timeout(const char *s, double *out)
{
	double v;
	char *end;

	if ((s[0] < '0' || s[0] > '9') && s[0] != '.')
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (errno != 0 || *end != '\0' || !(v >= 0 && v <= LR_TIMEOUT_MAX)) /* also NaN, inf */
		return -EINVAL;
	*out = v;
	return 0;
}

/*
 * parse_hosts -- "IP[,IP...]" (IPv4 addresses, at most LR_MAX_HOSTS) into
 * @o->hosts; 0 or -EINVAL after a message.
 */
static int parse_hosts(const char *list, const char *what, struct lr_opts *o)
{
	const char *p = list;

	o->nhosts = 0;
	while (*p != '\0') {
		size_t len = strcspn(p, ",");
		struct in_addr a;
		char ip[INET_ADDRSTRLEN];

		if (len == 0 || len >= sizeof(ip) || o->nhosts == LR_MAX_HOSTS) {
			lr_msg("%s: expected up to %d IPv4 addresses separated by ',', got '%s'",
			       what, LR_MAX_HOSTS, list);
			return -EINVAL;
		}
		memcpy(ip, p, len);
		ip[len] = '\0';
		if (inet_pton(AF_INET, ip, &a) != 1) {
			lr_msg("%s: '%s' is not an IPv4 address", what, ip);
			return -EINVAL;
		}
		memcpy(o->hosts[o->nhosts++], ip, len + 1);
		p += len + (p[len] == ',');
	}
	return 0;
}

/* lr_parse_opts -- fill @o from the command line; 0, 1 for --help, -EINVAL after a message. */
int lr_parse_opts(int argc, char **argv, struct lr_opts *o)
{
	enum {
		OPT_FABRIC = 256,
		OPT_TIMEOUT,
		OPT_JOIN,
		OPT_FIRST_ID,
		OPT_HOSTS,
		OPT_NO_PREFIX,
		OPT_KEEP_GOING,
		OPT_CONTROL,
		OPT_BIND
	};
	static const struct option longopts[] = {
	    {"nodes", required_argument, NULL, 'n'},
	    {"fabric", required_argument, NULL, OPT_FABRIC},
	    {"timeout", required_argument, NULL, OPT_TIMEOUT},
	    {"join", required_argument, NULL, OPT_JOIN},
	    {"first-id", required_argument, NULL, OPT_FIRST_ID},
	    {"hosts", required_argument, NULL, OPT_HOSTS},
	    {"no-prefix", no_argument, NULL, OPT_NO_PREFIX},
	    {"keep-going", no_argument, NULL, OPT_KEEP_GOING},
	    {"bind", no_argument, NULL, OPT_BIND},
	    {"control", required_argument, NULL, OPT_CONTROL},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	bool have_n = false;
	int c;

	*o = (struct lr_opts){.first_id = 1};
	/* '+': stop at PROGRAM, so its own options are left alone; every call consumes input */
	while ((c = getopt_long(argc, argv, "+n:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'n':
			if (parse_ulong(optarg, 1, LR_MAX_NODES, &o->n)) {
				lr_msg("-n: expected a node count from 1 to %d, got '%s'",
				       LR_MAX_NODES, optarg);
				return -EINVAL;
			}
			have_n = true;
			break;
		case OPT_FABRIC:
			if (optarg[0] == '\0') {
				lr_msg("--fabric: empty provider name");
				return -EINVAL;
			}
			if (!fab_names_known(optarg)) {
				char built[64];

				lr_msg("--fabric %s: no such provider in this build, which has: %s",
				       optarg, fab_names_list(built, sizeof(built)));
				return -EINVAL;
			}
			o->fabric = optarg;
			break;
		case OPT_TIMEOUT:
			if (parse_timeout(optarg, &o->timeout)) {
				lr_msg("--timeout: expected seconds >= 0, got '%s'", optarg);
				return -EINVAL;
			}
			break;
		case OPT_JOIN:
			if (strchr(optarg, ':') == NULL || optarg[0] == ':') {
				lr_msg("--join: expected HOST:PORT, got '%s'", optarg);
				return -EINVAL;
			}
			o->join = optarg;
			break;
		case OPT_FIRST_ID:
			if (parse_ulong(optarg, 1, UINT32_MAX, &o->first_id)) {
				lr_msg("--first-id: expected a node id from 1 to %" PRIu32
				       ", got '%s'",
				       UINT32_MAX, optarg);
				return -EINVAL;
			}
			break;
		case OPT_HOSTS:
			if (parse_hosts(optarg, "--hosts", o))
				return -EINVAL;
			break;
		case OPT_NO_PREFIX:
			o->no_prefix = true;
			break;
		case OPT_KEEP_GOING:
			o->keep_going = true;
			break;
		case OPT_BIND:
			o->bind = true;
			break;
		case OPT_CONTROL:
			if (optarg[0] == '\0' ||
			    strlen(optarg) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
				lr_msg(
				    "--control: expected a socket path of 1 to %zu bytes, got '%s'",
				    sizeof(((struct sockaddr_un *)0)->sun_path) - 1, optarg);
				return -EINVAL;
			}
			o->control = optarg;
			break;
		case 'h':
			return 1;
		default:
			return -EINVAL; /* getopt_long() has said what is wrong */
		}
	}
	if (!have_n) {
		lr_msg("-n N is required");
		return -EINVAL;
	}
	if (o->nhosts == 0 && getenv("LOCO_RUN_HOSTS") != NULL && getenv("LOCO_RUN_HOSTS")[0] &&
	    parse_hosts(getenv("LOCO_RUN_HOSTS"), "LOCO_RUN_HOSTS", o))
		return -EINVAL;
	if (o->nhosts == 0) {
		memcpy(o->hosts[0], LR_LOCALHOST, sizeof(LR_LOCALHOST));
		o->nhosts = 1;
	}
	if (optind >= argc) {
		lr_msg("no PROGRAM given");
		return -EINVAL;
	}
	if (o->first_id + o->n - 1 > UINT32_MAX) {
		lr_msg("--first-id %lu with -n %lu: node ids past %" PRIu32, o->first_id, o->n,
		       UINT32_MAX);
		return -EINVAL;
	}
	o->argv = argv + optind;
	return 0;
}

/* check_exec -- 0 when @path is an executable regular file, else a positive errno. */
static int check_exec(const char *path)
{
	struct stat st;

	if (stat(path, &st) < 0)
		return errno;
	if (S_ISDIR(st.st_mode))
		return EISDIR;
	if (!S_ISREG(st.st_mode) || access(path, X_OK) < 0)
		return EACCES;
	return 0;
}

/*
 * lr_find_program -- 0 when execvp(@prog) can find something to run, as it searches: a name with a
 * '/' as is, any other name in each $PATH entry (unset: glibc's /bin:/usr/bin). Else an errno.
 */
int lr_find_program(const char *prog)
{
	const char *path = getenv("PATH");
	char full[4096];
	int best = ENOENT;

	if (prog[0] == '\0')
		return ENOENT;
	if (strchr(prog, '/') != NULL)
		return check_exec(prog);
	if (path == NULL)
		path = "/bin:/usr/bin";
	/* one entry per pass; each pass moves past a ':' or ends */
	for (size_t guard = strlen(path) + 1; guard > 0; guard--) {
		const char *colon = strchr(path, ':');
		size_t dlen = colon != NULL ? (size_t)(colon - path) : strlen(path);
		int k, err;

		/* an empty entry is the current directory */
		k = snprintf(full, sizeof(full), "%.*s%s%s", (int)dlen, path, dlen ? "/" : "",
		             prog);
		if (k > 0 && (size_t)k < sizeof(full)) {
			err = check_exec(full);
			if (err == 0)
				return 0;
			if (err != ENOENT && err != ENOTDIR)
				best = err; /* as execvp: EACCES beats "not found" */
		}
		if (colon == NULL)
			break;
		path = colon + 1;
	}
	return best;
}
