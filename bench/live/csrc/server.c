/*
 * The live benchmark's C UDP echo server (dragonc bench --live), built
 * with cc at bench time: what a careful user would run instead of
 * dragonc. One socket per thread on ADDR:PORT with SO_REUSEPORT (the
 * kernel spreads flows over them by their 4-tuple hash), one thread per
 * allowed CPU pinned to it, each answering with recvmmsg and sendmmsg in
 * batches of up to 64. It prints "ready" once every socket is bound and
 * serves until killed.
 *
 * usage: server NETNS ADDR PORT THREADS
 * (NETNS: a file under /run/netns to join first, or "-"; THREADS 0: one
 * per allowed CPU).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#define VLEN 64
#define BUF 2048

struct worker {
	int fd, cpu;
	pthread_t t;
};

static void die(const char *what)
{
	fprintf(stderr, "server: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void *serve(void *arg)
{
	struct worker *w = arg;
	if (w->cpu >= 0) {
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET(w->cpu, &set);
		pthread_setaffinity_np(pthread_self(), sizeof set, &set);
	}
	static __thread char bufs[VLEN][BUF];
	struct mmsghdr msgs[VLEN];
	struct iovec iov[VLEN];
	struct sockaddr_in from[VLEN];
	for (;;) {
		for (int i = 0; i < VLEN; i++) {
			iov[i] = (struct iovec){.iov_base = bufs[i], .iov_len = BUF};
			msgs[i] = (struct mmsghdr){.msg_hdr = {.msg_name = &from[i], .msg_namelen = sizeof from[i], .msg_iov = &iov[i], .msg_iovlen = 1}};
		}
		int n = recvmmsg(w->fd, msgs, VLEN, MSG_WAITFORONE, NULL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			die("recvmmsg");
		}
		for (int i = 0; i < n; i++)
			iov[i].iov_len = msgs[i].msg_len;
		for (int done = 0; done < n;) {
			int s = sendmmsg(w->fd, msgs + done, (unsigned)(n - done), 0);
			if (s < 0) {
				if (errno == EINTR || errno == EAGAIN || errno == ENOBUFS)
					break; /* dropped, as a full queue drops */
				die("sendmmsg");
			}
			done += s;
		}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: server NETNS ADDR PORT THREADS\n");
		return 2;
	}
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (strcmp(argv[1], "-") != 0) {
		int fd = open(argv[1], O_RDONLY | O_CLOEXEC);
		if (fd < 0 || setns(fd, CLONE_NEWNET) < 0)
			die(argv[1]);
		close(fd);
	}
	struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((unsigned short)atoi(argv[3]))};
	if (inet_pton(AF_INET, argv[2], &addr.sin_addr) != 1) {
		fprintf(stderr, "server: bad address %s\n", argv[2]);
		return 2;
	}
	cpu_set_t allowed;
	int cpus[CPU_SETSIZE], ncpu = 0;
	if (sched_getaffinity(0, sizeof allowed, &allowed) == 0)
		for (int c = 0; c < CPU_SETSIZE; c++)
			if (CPU_ISSET(c, &allowed))
				cpus[ncpu++] = c;
	int n = atoi(argv[4]);
	if (n <= 0)
		n = ncpu > 0 ? ncpu : 1;
	struct worker *ws = calloc((size_t)n, sizeof *ws);
	for (int i = 0; i < n; i++) {
		int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), one = 1;
		if (fd < 0)
			die("socket");
		if (setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) < 0)
			die("SO_REUSEPORT");
		if (bind(fd, (struct sockaddr *)&addr, sizeof addr) < 0)
			die("bind");
		ws[i] = (struct worker){.fd = fd, .cpu = ncpu > 0 ? cpus[i % ncpu] : -1};
	}
	for (int i = 0; i < n; i++)
		if (pthread_create(&ws[i].t, NULL, serve, &ws[i]) != 0)
			die("pthread_create");
	printf("ready %d threads\n", n);
	fflush(stdout);
	for (int i = 0; i < n; i++)
		pthread_join(ws[i].t, NULL);
	return 0;
}
