/*
 * The live benchmark's load generator (dragonc bench --live), built with
 * cc at bench time. It keeps INFLIGHT UDP echo requests outstanding over
 * SOCKETS connected sockets (each its own source port, so that the
 * server's RSS or SO_REUSEPORT hash spreads them), served by THREADS
 * threads that share the sockets out: in each, epoll says which sockets
 * have answers, recvmmsg reads them in batches and sendmmsg sends the
 * next requests in batches. More than one thread matters on a veth,
 * where the kernel runs the receiving side's softirq work (an XDP
 * program's included) within the sender's system call: one thread would
 * put all of it on one core. A request names its slot and sequence
 * number, so an answer is matched to what is outstanding; a request
 * unanswered after TIMEOUT_MS is counted lost and its slot sends a new
 * one. Latencies (CLOCK_MONOTONIC, read before each send call and once
 * per received batch) go into histograms with 1/128 relative resolution.
 *
 * After WARMUP_MS, it measures for DURATION_MS or until COUNT answers
 * (COUNT 0: no count), then stops sending, waits for what is still
 * outstanding (answers counted as drained, timeouts as lost) and prints
 * one JSON object: the measured window's answers, losses, seconds,
 * percentiles, the host's busy CPU time over the window (/proc/stat: user,
 * nice, system, irq, softirq and steal of every CPU) and this process's
 * own (getrusage, every thread).
 *
 * With PROTO icmp the requests are ICMP echo requests (ping, RFC 792)
 * on the kernel's ping sockets (SOCK_DGRAM, IPPROTO_ICMP: the kernel
 * fills in the identifier, one per socket, and the checksum), carrying
 * the same slot and sequence number as their data; PORT is unused.
 *
 * usage: gen NETNS DST PORT INFLIGHT SOCKETS DURATION_MS COUNT TIMEOUT_MS WARMUP_MS THREADS PROTO
 * (NETNS: a file under /run/netns to join first, or "-"; PROTO: udp or icmp).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

#define MAGIC 0x64726763u /* "drgc" */
#define VLEN 64
#define PAYLOAD 32

struct req {
	uint32_t magic, slot;
	uint64_t seq, pad[2];
};

/* msg is what a socket sends and receives: with ICMP, an echo header
 * (type, code, checksum, identifier, sequence) before the request. */
struct msg {
	uint8_t type, code;
	uint16_t cksum, id, seq;
	struct req r;
};
_Static_assert(sizeof(struct msg) == 8 + sizeof(struct req), "an echo header of 8 bytes");

#define ICMP_HDR 8
static int icmp; /* PROTO icmp */

struct slot {
	int sock, out, pending;
	uint64_t seq, sent;
};

/* Shared by the threads: the phase (0 warm-up, 1 measuring, 2 draining,
 * set by the main thread), the answers counted in the window, the
 * slots (each touched by the thread of its socket only). */
static _Atomic int phase;
static _Atomic uint64_t answered_all;
static int inflight, nsock, nthreads;
static uint64_t timeout;
static int *fds;
static struct slot *slots;

struct worker {
	pthread_t t;
	int id, ep;
	uint64_t answered, lost, late, stray, refused, drained, seq;
	uint64_t hist[BUCKETS];
	struct msg out[VLEN], in[VLEN];
	struct mmsghdr omsg[VLEN], imsg[VLEN];
	struct iovec oiov[VLEN], iiov[VLEN];
	int batch[VLEN];
};

/* send_pending sends the pending requests of socket s in one batch. */
static void send_pending(struct worker *w, int s)
{
	int n = 0;
	for (int i = s; i < inflight && n < VLEN; i += nsock) {
		struct slot *sl = &slots[i];
		if (!sl->pending)
			continue;
		sl->seq = ++w->seq;
		w->out[n] = (struct msg){.type = 8, .r = {.magic = MAGIC, .slot = (uint32_t)i, .seq = sl->seq}};
		w->oiov[n] = icmp ? (struct iovec){.iov_base = &w->out[n], .iov_len = ICMP_HDR + PAYLOAD}
				  : (struct iovec){.iov_base = &w->out[n].r, .iov_len = PAYLOAD};
		w->omsg[n] = (struct mmsghdr){.msg_hdr = {.msg_iov = &w->oiov[n], .msg_iovlen = 1}};
		w->batch[n++] = i;
	}
	if (n == 0)
		return;
	/* The clock is read before the call: on a veth the kernel may carry
	 * the request, and the server or an XDP program answer it, within
	 * this very call (softirq at bottom-half enable). */
	uint64_t now = mono();
	int sent = sendmmsg(fds[s], w->omsg, (unsigned)n, 0);
	if (sent < 0)
		sent = 0; /* ECONNREFUSED, ENOBUFS: the slots try again */
	for (int k = 0; k < sent; k++) {
		struct slot *sl = &slots[w->batch[k]];
		sl->pending = 0;
		sl->out = 1;
		sl->sent = now;
	}
}

/* receive reads socket s's answers in batches. */
static void receive(struct worker *w, int s, int ph)
{
	for (;;) {
		for (int k = 0; k < VLEN; k++) {
			w->iiov[k] = icmp ? (struct iovec){.iov_base = &w->in[k], .iov_len = sizeof w->in[k]}
					  : (struct iovec){.iov_base = &w->in[k].r, .iov_len = sizeof w->in[k].r};
			w->imsg[k] = (struct mmsghdr){.msg_hdr = {.msg_iov = &w->iiov[k], .msg_iovlen = 1}};
		}
		int n = recvmmsg(fds[s], w->imsg, VLEN, MSG_DONTWAIT, NULL);
		if (n < 0) {
			if (errno == ECONNREFUSED) {
				w->refused++;
				continue;
			}
			return;
		}
		uint64_t now = mono();
		uint64_t got = 0;
		for (int k = 0; k < n; k++) {
			struct req *r = &w->in[k].r;
			unsigned want = icmp ? ICMP_HDR + PAYLOAD : PAYLOAD;
			if (w->imsg[k].msg_len != want || (icmp && w->in[k].type != 0) || r->magic != MAGIC || r->slot >= (uint32_t)inflight || slots[r->slot].sock != s) {
				w->stray++;
				continue;
			}
			struct slot *sl = &slots[r->slot];
			if (!sl->out || r->seq != sl->seq) {
				w->late++;
				continue;
			}
			sl->out = 0;
			if (ph == 2) {
				w->drained++;
				continue;
			}
			sl->pending = 1;
			if (ph == 1) {
				got++;
				w->hist[bucket(now - sl->sent)]++;
			}
		}
		if (got) {
			w->answered += got;
			atomic_fetch_add(&answered_all, got);
		}
		if (n < VLEN)
			return;
	}
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
		if (ph >= 1 && seen == 0) {
			/* The window opens: what the warm-up counted goes. */
			seen = 1;
			w->answered = w->lost = w->late = w->stray = w->refused = 0;
			memset(w->hist, 0, sizeof w->hist);
		}
		if (ph == 2 && mend == 0)
			mend = now;
		if (now >= next_scan) {
			next_scan = now + 1000000;
			int outstanding = 0;
			for (int s = w->id; s < nsock; s += nthreads)
				for (int i = s; i < inflight; i += nsock) {
					struct slot *sl = &slots[i];
					if (sl->out && now - sl->sent > timeout) {
						if (ph != 0)
							w->lost++;
						sl->out = 0;
						sl->pending = ph != 2;
					}
					outstanding += sl->out;
				}
			if (ph == 2 && (outstanding == 0 || now - mend > timeout))
				return NULL;
		}
		if (ph != 2)
			for (int s = w->id; s < nsock; s += nthreads)
				send_pending(w, s);
		int ne = epoll_wait(w->ep, evs, VLEN, 1);
		if (ne < 0 && errno != EINTR)
			die("epoll_wait");
		for (int e = 0; e < ne; e++)
			receive(w, (int)evs[e].data.u32, ph);
	}
}

int main(int argc, char **argv)
{
	if (argc != 12) {
		fprintf(stderr, "usage: gen NETNS DST PORT INFLIGHT SOCKETS DURATION_MS COUNT TIMEOUT_MS WARMUP_MS THREADS PROTO\n");
		return 2;
	}
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	join_netns(argv[1]);
	struct sockaddr_in dst = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[3]))};
	if (inet_pton(AF_INET, argv[2], &dst.sin_addr) != 1) {
		fprintf(stderr, "gen: bad address %s\n", argv[2]);
		return 2;
	}
	inflight = atoi(argv[4]);
	nsock = atoi(argv[5]);
	uint64_t duration = strtoull(argv[6], 0, 10) * 1000000ull, count = strtoull(argv[7], 0, 10);
	timeout = strtoull(argv[8], 0, 10) * 1000000ull;
	uint64_t warmup = strtoull(argv[9], 0, 10) * 1000000ull;
	nthreads = atoi(argv[10]);
	icmp = strcmp(argv[11], "icmp") == 0;
	if (!icmp && strcmp(argv[11], "udp") != 0) {
		fprintf(stderr, "gen: PROTO %s is neither udp nor icmp\n", argv[11]);
		return 2;
	}
	if (icmp) {
		/* Ping sockets are open to the groups of this range, per
		 * network namespace (net.ipv4.ping_group_range; ping_init_sock). */
		int f = open("/proc/sys/net/ipv4/ping_group_range", O_WRONLY | O_CLOEXEC);
		if (f < 0 || write(f, "0 0", 3) != 3)
			die("net.ipv4.ping_group_range");
		close(f);
	}
	if (inflight < 1 || nsock < 1 || nsock > inflight || duration == 0 || timeout == 0 || nthreads < 1) {
		fprintf(stderr, "gen: bad arguments\n");
		return 2;
	}
	if (nthreads > nsock)
		nthreads = nsock;

	fds = calloc((size_t)nsock, sizeof *fds);
	slots = calloc((size_t)inflight, sizeof *slots);
	struct worker *ws = calloc((size_t)nthreads, sizeof *ws);
	if (!fds || !slots || !ws)
		die("calloc");
	for (int t = 0; t < nthreads; t++) {
		ws[t].id = t;
		ws[t].ep = epoll_create1(EPOLL_CLOEXEC);
		if (ws[t].ep < 0)
			die("epoll_create1");
	}
	for (int s = 0; s < nsock; s++) {
		fds[s] = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, icmp ? IPPROTO_ICMP : 0);
		if (fds[s] < 0)
			die("socket");
		if (connect(fds[s], (struct sockaddr *)&dst, sizeof dst) < 0)
			die("connect");
		struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)s};
		if (epoll_ctl(ws[s % nthreads].ep, EPOLL_CTL_ADD, fds[s], &ev) < 0)
			die("epoll_ctl");
	}
	for (int i = 0; i < inflight; i++) {
		slots[i].sock = i % nsock;
		slots[i].pending = 1;
	}
	uint64_t start = mono();
	for (int t = 0; t < nthreads; t++)
		if (pthread_create(&ws[t].t, NULL, run, &ws[t]) != 0)
			die("pthread_create");

	sleep_until(start + warmup);
	uint64_t busy0 = busy_ns(), self0 = self_ns(), mstart = mono();
	atomic_store(&answered_all, 0);
	atomic_store(&phase, 1);
	uint64_t mend;
	for (;;) {
		mend = mono();
		if (mend - mstart >= duration || (count > 0 && atomic_load(&answered_all) >= count))
			break;
		sleep_until(mend + 200000);
	}
	atomic_store(&phase, 2);
	uint64_t busy1 = busy_ns(), self1 = self_ns();

	static uint64_t hist[BUCKETS];
	uint64_t answered = 0, lost = 0, late = 0, stray = 0, refused = 0, drained = 0;
	for (int t = 0; t < nthreads; t++) {
		struct worker *w = &ws[t];
		pthread_join(w->t, NULL);
		answered += w->answered;
		lost += w->lost;
		late += w->late;
		stray += w->stray;
		refused += w->refused;
		drained += w->drained;
		for (int i = 0; i < BUCKETS; i++)
			hist[i] += w->hist[i];
	}
	printf("{\"answered\":%llu,\"lost\":%llu,\"late\":%llu,\"stray\":%llu,\"refused\":%llu,\"drained\":%llu,"
	       "\"window_ns\":%llu,\"p50_ns\":%llu,\"p99_ns\":%llu,\"busy_ns\":%llu,\"self_ns\":%llu}\n",
	       (unsigned long long)answered, (unsigned long long)lost, (unsigned long long)late,
	       (unsigned long long)stray, (unsigned long long)refused, (unsigned long long)drained,
	       (unsigned long long)(mend - mstart), (unsigned long long)percentile(hist, 0.50),
	       (unsigned long long)percentile(hist, 0.99), (unsigned long long)(busy1 - busy0),
	       (unsigned long long)(self1 - self0));
	return 0;
}
