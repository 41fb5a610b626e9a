/*
 * The memcached load generator of the live benchmark (dragonc bench
 * --live --memcached), built with cc at bench time. It speaks
 * memcached's UDP protocol (memcached's doc/protocol.txt, "UDP
 * protocol"): each datagram starts with an 8-byte frame header of four
 * 16-bit big-endian fields, the request id, the sequence number (0), the
 * total number of datagrams in the message (1) and a reserved 0, and
 * then holds an ASCII command, here `get KEY\r\n`. memcached answers with
 * the same request id; a hit is `VALUE KEY FLAGS BYTES\r\nDATA\r\nEND\r\n`,
 * a miss `END\r\n`, both in one datagram for the small values the
 * benchmark stores.
 *
 * MODE rate sends N requests a second on a timer (open loop, one
 * thread): the latency of a request is not hidden by waiting for the
 * one before, as a closed loop would. MODE inflight keeps N requests
 * outstanding (closed loop, THREADS threads sharing the sockets out),
 * which saturates the server. The requests go over SOCKETS connected
 * sockets (each its own source port), each with up to 256 slots: a
 * request id is the slot's number in its socket in the low byte and the
 * slot's generation in the high byte, so an answer is matched to what is
 * outstanding; one unanswered after TIMEOUT_MS is counted lost (and the
 * slot used again); answers after that are late. The keys are k0 ..
 * k(KEYS-1), in turn.
 *
 * After WARMUP_MS it measures for DURATION_MS, then stops sending, waits
 * at most TIMEOUT_MS for what is outstanding, and prints one JSON
 * object: answers (hits and misses), lost (in the window or the drain),
 * answers in the drain, late, stray (datagrams that
 * are no answer to an outstanding request: a bad header, an unknown or
 * reused id, the wrong key), server errors, requests sent, ticks of the
 * rate timer that found no free slot (skipped), the window, p50 and p99
 * of the round trip, the host's busy CPU time and this process's own.
 *
 * With SERVER_PID not 0, it also reports that process's CPU time over
 * the window (server_ns: utime and stime of /proc/PID/stat, proc(5)):
 * how busy the load kept the server; with SERVER_CPU not negative, the
 * busy time of that CPU over the window (core_ns: its /proc/stat line,
 * as busy_ns counts), the server's and the kernel's work there.
 *
 * usage: mcgen NETNS DST PORT MODE N SOCKETS DURATION_MS TIMEOUT_MS WARMUP_MS THREADS KEYS SERVER_PID SERVER_CPU
 * (NETNS: a file under /run/netns to join first, or "-"; MODE: rate or inflight).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "common.h"

#define VLEN 64
#define MAXSLOTS 256
#define REQ 32   /* room for the header and "get k<number>\r\n" */
#define ANS 2048 /* a hit of the benchmark's values fits well within */
#define TIMER (-1)

struct slot {
	int out, pending, key;
	uint8_t gen;
	uint64_t sent;
};

struct sock {
	int fd, nslots, next;
	struct slot slots[MAXSLOTS];
};

static _Atomic int phase; /* 0 warm-up, 1 measuring, 2 draining */
static int nsock, nthreads, rate_mode, nkeys;
static uint64_t timeout;
static struct sock *socks;
static _Atomic unsigned keyseq;

struct worker {
	pthread_t t;
	int id, ep, timer, rr;
	uint64_t answered, hits, misses, lost, late, stray, errors, sent, skipped, drained;
	uint64_t hist[BUCKETS];
	char out[VLEN][REQ], in[VLEN][ANS];
	struct mmsghdr omsg[VLEN], imsg[VLEN];
	struct iovec oiov[VLEN], iiov[VLEN];
	struct slot *batch[VLEN];
};

/* request writes slot i of socket s's request into buf; its length. */
static int request(char *buf, struct sock *so, int i)
{
	struct slot *sl = &so->slots[i];
	sl->gen++;
	sl->key = (int)(atomic_fetch_add(&keyseq, 1) % (unsigned)nkeys);
	uint16_t h[4] = {htons((uint16_t)(sl->gen << 8 | i)), 0, htons(1), 0};
	memcpy(buf, h, 8);
	return 8 + snprintf(buf + 8, REQ - 8, "get k%d\r\n", sl->key);
}

static void sent_now(struct worker *w, struct slot *sl, uint64_t now)
{
	sl->pending = 0;
	sl->out = 1;
	sl->sent = now;
	if (atomic_load(&phase) == 1)
		w->sent++;
}

/* send_pending sends socket s's pending requests in one batch (closed loop). */
static void send_pending(struct worker *w, struct sock *so)
{
	int n = 0;
	for (int i = 0; i < so->nslots && n < VLEN; i++) {
		if (!so->slots[i].pending)
			continue;
		int len = request(w->out[n], so, i);
		w->oiov[n] = (struct iovec){.iov_base = w->out[n], .iov_len = (size_t)len};
		w->omsg[n] = (struct mmsghdr){.msg_hdr = {.msg_iov = &w->oiov[n], .msg_iovlen = 1}};
		w->batch[n++] = &so->slots[i];
	}
	if (n == 0)
		return;
	/* The clock is read before the call: on a veth the answer may come
	 * within it. */
	uint64_t now = mono();
	int sent = sendmmsg(so->fd, w->omsg, (unsigned)n, 0);
	for (int k = 0; k < sent; k++)
		sent_now(w, w->batch[k], now);
}

/* send_one sends one request on the next socket with a free slot (rate
 * mode); a tick that finds none is skipped. */
static void send_one(struct worker *w)
{
	for (int t = 0; t < nsock; t++) {
		struct sock *so = &socks[w->rr];
		w->rr = (w->rr + 1) % nsock;
		for (int c = 0; c < so->nslots; c++) {
			int i = (so->next + c) % so->nslots;
			struct slot *sl = &so->slots[i];
			if (sl->out)
				continue;
			so->next = (i + 1) % so->nslots;
			int len = request(w->out[0], so, i);
			uint64_t now = mono();
			if (send(so->fd, w->out[0], (size_t)len, 0) == len)
				sent_now(w, sl, now);
			return;
		}
	}
	if (atomic_load(&phase) == 1)
		w->skipped++;
}

/* answer judges one datagram of socket so: an answer to an outstanding
 * request, which is then no longer outstanding, or late, stray or an
 * error. */
static void answer(struct worker *w, struct sock *so, const char *b, unsigned len, uint64_t now, int ph)
{
	uint16_t h[4];
	if (len < 8) {
		w->stray++;
		return;
	}
	memcpy(h, b, 8);
	unsigned id = ntohs(h[0]), i = id & 0xff;
	if (ntohs(h[1]) != 0 || ntohs(h[2]) != 1 || i >= (unsigned)so->nslots) {
		w->stray++;
		return;
	}
	struct slot *sl = &so->slots[i];
	if (!sl->out || (id >> 8) != sl->gen) {
		w->late++;
		return;
	}
	const char *body = b + 8;
	unsigned blen = len - 8;
	char want[32];
	int wl = snprintf(want, sizeof want, "VALUE k%d ", sl->key);
	int hit = 0;
	if (blen == 5 && memcmp(body, "END\r\n", 5) == 0)
		hit = 0;
	else if (blen >= (unsigned)wl + 5 && memcmp(body, want, (size_t)wl) == 0 && memcmp(body + blen - 5, "END\r\n", 5) == 0)
		hit = 1;
	else if ((blen >= 5 && memcmp(body, "ERROR", 5) == 0) || (blen >= 12 && (memcmp(body, "SERVER_ERROR", 12) == 0 || memcmp(body, "CLIENT_ERROR", 12) == 0))) {
		if (ph == 1)
			w->errors++;
		sl->out = 0;
		sl->pending = !rate_mode && ph != 2;
		return;
	} else {
		w->stray++;
		return;
	}
	sl->out = 0;
	sl->pending = !rate_mode && ph != 2;
	if (ph == 2)
		w->drained++;
	if (ph != 1)
		return;
	w->answered++;
	if (hit)
		w->hits++;
	else
		w->misses++;
	w->hist[bucket(now - sl->sent)]++;
}

/* receive reads socket so's answers in batches. */
static void receive(struct worker *w, struct sock *so, int ph)
{
	for (;;) {
		for (int k = 0; k < VLEN; k++) {
			w->iiov[k] = (struct iovec){.iov_base = w->in[k], .iov_len = ANS};
			w->imsg[k] = (struct mmsghdr){.msg_hdr = {.msg_iov = &w->iiov[k], .msg_iovlen = 1}};
		}
		int n = recvmmsg(so->fd, w->imsg, VLEN, MSG_DONTWAIT, NULL);
		if (n < 0) {
			if (errno == ECONNREFUSED)
				continue; /* nothing listens (yet): the requests time out */
			return;
		}
		uint64_t now = mono();
		for (int k = 0; k < n; k++)
			answer(w, so, w->in[k], w->imsg[k].msg_len, now, ph);
		if (n < VLEN)
			return;
	}
}

/* proc_ns is process pid's CPU time, every thread of it; 0 when it cannot
 * be read. The command name, in parentheses, may hold spaces: the
 * fields count from the last ')', after which come state (field 3) ...
 * utime (14) and stime (15). */
static uint64_t proc_ns(int pid)
{
	char path[64], buf[1024];
	if (pid <= 0)
		return 0;
	snprintf(path, sizeof path, "/proc/%d/stat", pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = 0;
	char *p = strrchr(buf, ')');
	unsigned long long ut = 0, st = 0;
	if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return 0;
	return (uint64_t)(ut + st) * (1000000000ull / (uint64_t)sysconf(_SC_CLK_TCK));
}

/* cpu_busy_ns is CPU cpu's busy time since boot, from its /proc/stat
 * line (user nice system idle iowait irq softirq steal); 0 for a
 * negative cpu or one not found. */
static uint64_t cpu_busy_ns(int cpu)
{
	if (cpu < 0)
		return 0;
	FILE *f = fopen("/proc/stat", "r");
	if (!f)
		return 0;
	char line[512], want[32];
	int wl = snprintf(want, sizeof want, "cpu%d ", cpu);
	unsigned long long v[8] = {0}, ticks = 0;
	while (fgets(line, sizeof line, f))
		if (strncmp(line, want, (size_t)wl) == 0) {
			if (sscanf(line + wl, "%llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) == 8)
				ticks = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
			break;
		}
	fclose(f);
	return (uint64_t)ticks * (1000000000ull / (uint64_t)sysconf(_SC_CLK_TCK));
}

static void *run(void *arg)
{
	struct worker *w = arg;
	uint64_t next_scan = 0, mend = 0;
	int seen = 0;
	struct epoll_event evs[VLEN];
	for (;;) {
		int ph = atomic_load(&phase);
		uint64_t now = mono();
		if (ph >= 1 && !seen) {
			/* The window opens: what the warm-up counted goes. */
			seen = 1;
			w->answered = w->hits = w->misses = w->lost = w->late = w->stray = w->errors = w->sent = w->skipped = 0;
			memset(w->hist, 0, sizeof w->hist);
		}
		if (ph == 2 && mend == 0)
			mend = now;
		if (now >= next_scan) {
			next_scan = now + 1000000;
			int outstanding = 0;
			for (int s = w->id; s < nsock; s += nthreads)
				for (int i = 0; i < socks[s].nslots; i++) {
					struct slot *sl = &socks[s].slots[i];
					if (sl->out && now - sl->sent > timeout) {
						if (ph != 0)
							w->lost++;
						sl->out = 0;
						sl->pending = !rate_mode && ph != 2;
					}
					outstanding += sl->out;
				}
			if (ph == 2 && (outstanding == 0 || now - mend > timeout))
				return NULL;
		}
		if (ph != 2 && !rate_mode)
			for (int s = w->id; s < nsock; s += nthreads)
				send_pending(w, &socks[s]);
		int ne = epoll_wait(w->ep, evs, VLEN, 1);
		if (ne < 0 && errno != EINTR)
			die("epoll_wait");
		for (int e = 0; e < ne; e++) {
			if (evs[e].data.u32 == (uint32_t)TIMER) {
				uint64_t ticks = 0;
				if (read(w->timer, &ticks, sizeof ticks) != sizeof ticks)
					continue;
				for (uint64_t k = 0; k < ticks && ph != 2; k++)
					send_one(w);
				continue;
			}
			receive(w, &socks[evs[e].data.u32], ph);
		}
	}
}

int main(int argc, char **argv)
{
	if (argc != 14) {
		fprintf(stderr, "usage: mcgen NETNS DST PORT MODE N SOCKETS DURATION_MS TIMEOUT_MS WARMUP_MS THREADS KEYS SERVER_PID SERVER_CPU\n");
		return 2;
	}
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	join_netns(argv[1]);
	struct sockaddr_in dst = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[3]))};
	if (inet_pton(AF_INET, argv[2], &dst.sin_addr) != 1) {
		fprintf(stderr, "mcgen: bad address %s\n", argv[2]);
		return 2;
	}
	rate_mode = strcmp(argv[4], "rate") == 0;
	if (!rate_mode && strcmp(argv[4], "inflight") != 0) {
		fprintf(stderr, "mcgen: MODE %s is neither rate nor inflight\n", argv[4]);
		return 2;
	}
	long n = atol(argv[5]);
	nsock = atoi(argv[6]);
	uint64_t duration = strtoull(argv[7], 0, 10) * 1000000ull;
	timeout = strtoull(argv[8], 0, 10) * 1000000ull;
	uint64_t warmup = strtoull(argv[9], 0, 10) * 1000000ull;
	nthreads = rate_mode ? 1 : atoi(argv[10]);
	nkeys = atoi(argv[11]);
	int server = atoi(argv[12]), server_cpu = atoi(argv[13]);
	if (n < 1 || n > 10000000 || nsock < 1 || duration == 0 || timeout == 0 || nthreads < 1 || nkeys < 1 ||
	    (!rate_mode && (nsock > n || n > (long)nsock * MAXSLOTS))) {
		fprintf(stderr, "mcgen: bad arguments\n");
		return 2;
	}
	if (nthreads > nsock)
		nthreads = nsock;

	socks = calloc((size_t)nsock, sizeof *socks);
	struct worker *ws = calloc((size_t)nthreads, sizeof *ws);
	if (!socks || !ws)
		die("calloc");
	for (int t = 0; t < nthreads; t++) {
		ws[t].id = t;
		ws[t].timer = -1;
		ws[t].ep = epoll_create1(EPOLL_CLOEXEC);
		if (ws[t].ep < 0)
			die("epoll_create1");
	}
	for (int s = 0; s < nsock; s++) {
		struct sock *so = &socks[s];
		/* Rate mode: every socket has all the slots; inflight: N shared out. */
		so->nslots = rate_mode ? MAXSLOTS : (int)(n / nsock + (s < n % nsock));
		for (int i = 0; i < so->nslots; i++)
			so->slots[i].pending = !rate_mode;
		so->fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (so->fd < 0)
			die("socket");
		if (connect(so->fd, (struct sockaddr *)&dst, sizeof dst) < 0)
			die("connect");
		struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)s};
		if (epoll_ctl(ws[s % nthreads].ep, EPOLL_CTL_ADD, so->fd, &ev) < 0)
			die("epoll_ctl");
	}
	if (rate_mode) {
		ws[0].timer = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
		if (ws[0].timer < 0)
			die("timerfd_create");
		long period = 1000000000L / n;
		struct itimerspec its = {.it_interval = {.tv_sec = period / 1000000000L, .tv_nsec = period % 1000000000L},
					 .it_value = {.tv_sec = 0, .tv_nsec = 1000}};
		if (timerfd_settime(ws[0].timer, 0, &its, NULL) < 0)
			die("timerfd_settime");
		struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)TIMER};
		if (epoll_ctl(ws[0].ep, EPOLL_CTL_ADD, ws[0].timer, &ev) < 0)
			die("epoll_ctl");
	}
	uint64_t start = mono();
	for (int t = 0; t < nthreads; t++)
		if (pthread_create(&ws[t].t, NULL, run, &ws[t]) != 0)
			die("pthread_create");

	sleep_until(start + warmup);
	uint64_t busy0 = busy_ns(), self0 = self_ns(), server0 = proc_ns(server), core0 = cpu_busy_ns(server_cpu), mstart = mono();
	atomic_store(&phase, 1);
	sleep_until(mstart + duration);
	uint64_t mend = mono();
	atomic_store(&phase, 2);
	uint64_t busy1 = busy_ns(), self1 = self_ns(), server1 = proc_ns(server), core1 = cpu_busy_ns(server_cpu);

	static uint64_t hist[BUCKETS];
	uint64_t answered = 0, hits = 0, misses = 0, lost = 0, late = 0, stray = 0, errors = 0, sent = 0, skipped = 0, drained = 0;
	for (int t = 0; t < nthreads; t++) {
		struct worker *w = &ws[t];
		pthread_join(w->t, NULL);
		answered += w->answered;
		hits += w->hits;
		misses += w->misses;
		lost += w->lost;
		late += w->late;
		stray += w->stray;
		errors += w->errors;
		sent += w->sent;
		skipped += w->skipped;
		drained += w->drained;
		for (int i = 0; i < BUCKETS; i++)
			hist[i] += w->hist[i];
	}
	printf("{\"answered\":%llu,\"hits\":%llu,\"misses\":%llu,\"lost\":%llu,\"late\":%llu,\"stray\":%llu,\"errors\":%llu,"
	       "\"sent\":%llu,\"skipped\":%llu,\"drained\":%llu,\"window_ns\":%llu,\"p50_ns\":%llu,\"p99_ns\":%llu,\"busy_ns\":%llu,\"self_ns\":%llu,\"server_ns\":%llu,\"core_ns\":%llu}\n",
	       (unsigned long long)answered, (unsigned long long)hits, (unsigned long long)misses, (unsigned long long)lost,
	       (unsigned long long)late, (unsigned long long)stray, (unsigned long long)errors, (unsigned long long)sent,
	       (unsigned long long)skipped, (unsigned long long)drained, (unsigned long long)(mend - mstart), (unsigned long long)percentile(hist, 0.50),
	       (unsigned long long)percentile(hist, 0.99), (unsigned long long)(busy1 - busy0), (unsigned long long)(self1 - self0),
	       (unsigned long long)(server1 >= server0 ? server1 - server0 : 0), (unsigned long long)(core1 >= core0 ? core1 - core0 : 0));
	return 0;
}
