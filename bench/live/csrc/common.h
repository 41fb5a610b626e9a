/*
 * What the live benchmark's load generators (gen.c, mcgen.c) share: the
 * monotonic clock, latency histograms with 1/128 relative resolution,
 * the host's busy CPU time and the process's own, and joining a network
 * namespace. Built with them by cc at bench time.
 */
#ifndef DRAGONC_LIVE_COMMON_H
#define DRAGONC_LIVE_COMMON_H

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define SUB 64 /* histogram sub-buckets per power of two */
#define BUCKETS (64 * SUB)

static uint64_t mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + ts.tv_nsec;
}

static int bucket(uint64_t v)
{
	if (v < SUB)
		return (int)v;
	int e = 63 - __builtin_clzll(v); /* >= 6 */
	return (e - 5) * SUB + (int)((v >> (e - 6)) & (SUB - 1));
}

static uint64_t bucket_value(int i)
{
	if (i < SUB)
		return (uint64_t)i;
	int e = i / SUB + 5, sub = i % SUB;
	uint64_t lo = (uint64_t)(SUB + sub) << (e - 6);
	return lo + ((1ull << (e - 6)) >> 1);
}

static uint64_t percentile(const uint64_t *hist, double q)
{
	uint64_t n = 0;
	for (int i = 0; i < BUCKETS; i++)
		n += hist[i];
	if (n == 0)
		return 0;
	uint64_t rank = (uint64_t)(q * (double)n);
	if (rank < 1)
		rank = 1;
	uint64_t c = 0;
	for (int i = 0; i < BUCKETS; i++) {
		c += hist[i];
		if (c >= rank)
			return bucket_value(i);
	}
	return bucket_value(BUCKETS - 1);
}

/* busy_ns: the busy time of every CPU since boot, from /proc/stat. */
static uint64_t busy_ns(void)
{
	FILE *f = fopen("/proc/stat", "r");
	unsigned long long v[8] = {0};
	if (!f)
		return 0;
	if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) != 8)
		v[0] = v[1] = v[2] = v[5] = v[6] = v[7] = 0;
	fclose(f);
	/* user nice system idle iowait irq softirq steal */
	unsigned long long ticks = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
	return (uint64_t)ticks * (1000000000ull / (uint64_t)sysconf(_SC_CLK_TCK));
}

static uint64_t self_ns(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ((uint64_t)ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000ull +
	       ((uint64_t)ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000ull;
}

static void die(const char *what)
{
	fprintf(stderr, "%s: %s: %s\n", program_invocation_short_name, what, strerror(errno));
	exit(1);
}

static void sleep_until(uint64_t t)
{
	uint64_t now = mono();
	if (t > now) {
		struct timespec ts = {.tv_sec = (time_t)((t - now) / 1000000000u), .tv_nsec = (long)((t - now) % 1000000000u)};
		nanosleep(&ts, NULL);
	}
}

/* join_netns moves the process into the network namespace of the file
 * at path, unless it is "-". */
static void join_netns(const char *path)
{
	if (strcmp(path, "-") == 0)
		return;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || setns(fd, CLONE_NEWNET) < 0)
		die(path);
	close(fd);
}

#endif
