// SPDX-License-Identifier: MIT
/*
 * gc-compact: a small mark-compact heap that compacts concurrently with
 * userfaultfd, the way Android's ART moved to UFFDIO_MOVE.
 *
 * The heap is a space of 4 KiB pages holding 128-byte objects, reached
 * through a handle table. Mutator threads keep reading and updating their
 * objects. Each collection cycle:
 *
 *  1. Pause (all mutators stopped at a safepoint): objects die, the plan is
 *     made - pages whose objects all live ("dense") move whole to the start
 *     of the to-space, in order, so contiguous dense runs stay contiguous;
 *     the live objects of the other pages are packed into "assembled" pages
 *     after them - handles are forwarded to the to-space addresses and the
 *     to-space (empty) is registered with userfaultfd. The pause ends.
 *  2. Compaction, concurrent with the mutators: the collector moves the
 *     dense pages with one coalesced madvx_uffd_move_list() (a handful of
 *     UFFDIO_MOVE ioctls for thousands of pages: zero copy), and assembles
 *     the other pages and places them with UFFDIO_COPY. A mutator that
 *     touches a to-space page first faults; the handler thread resolves
 *     that page at once the same way (MOVE or assemble + COPY), and the
 *     collector's later op finds it present (EEXIST) and goes on.
 *  3. The from-space is given back with madvx_release() (the pages MOVE
 *     emptied cost nothing; the assembled-from pages are freed) and becomes
 *     the next cycle's to-space.
 *
 * The pause here also holds the "marking" and the forwarding of every handle
 * (O(heap), tens of ms for 64 MiB), which a real collector does concurrently
 * or incrementally; what userfaultfd takes out of the pause is the copying.
 *
 * It prints pause and compaction times, and verifies every object after
 * each cycle (contents, reachability, and that the from-space is empty).
 * Usage: gc-compact [--quick] [--pages N] [--threads N] [--cycles N]
 * Exit 0 verified, 1 a check failed, 77 userfaultfd/UFFDIO_MOVE unusable here.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <linux/userfaultfd.h>
#include <madvx.h>

#define PAGE 4096UL
#define OBJ 128UL
#define PER_PAGE (PAGE / OBJ)
#define WORDS (OBJ / 8 - 2)

struct object {
	uint64_t id;
	uint64_t version;
	uint64_t payload[WORDS];
};

/* What goes into one to-space page. */
struct to_page {
	bool moved;		/* dense: MOVE from src; else assembled */
	uint64_t src;		/* dense: from-space page */
	uint32_t n;		/* assembled: number of objects */
	uint64_t piece[PER_PAGE];	/* assembled: from-space address of each object */
};

static struct {
	size_t pages, nobj;
	unsigned int threads, cycles;
	uint8_t *space[2];
	_Atomic int from;		/* index of the current from-space */
	struct object *_Atomic *handle;	/* id -> object, NULL when dead */
	struct to_page *plans[2];	/* per space: its page -> how to fill it */
	struct to_page *plan;		/* the current to-space's */
	size_t plan_len, dense;
	struct madvx_uffd *uffd;
	pthread_rwlock_t safepoint;	/* mutators read-hold it between safepoints */
	atomic_bool done;
	atomic_bool compacting;		/* the to-space is registered */
	atomic_int in_fault;		/* handler callbacks running */
	atomic_ulong ops, bad, fault_moves, fault_copies;
} H;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static uint64_t word(uint64_t id, uint64_t version, unsigned int k)
{
	uint64_t x = id * 0x9e3779b97f4a7c15ULL ^ (version + k) * 0xbf58476d1ce4e5b9ULL;

	return x ^ (x >> 31);
}

static void obj_write(struct object *o, uint64_t id, uint64_t version)
{
	for (unsigned int k = 0; k < WORDS; k++)
		o->payload[k] = word(id, version, k);
	o->version = version;
	o->id = id;
}

static bool obj_ok(const struct object *o, uint64_t id)
{
	if (o->id != id)
		return false;
	for (unsigned int k = 0; k < WORDS; k++)
		if (o->payload[k] != word(id, o->version, k))
			return false;
	return true;
}

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* ---- mutators ---- */

/* Thread t owns the ids t, t + threads, ...: reads and updates only those. */
static void *mutator(void *arg)
{
	unsigned int t = (unsigned int)(uintptr_t)arg;
	uint64_t seed = 0x1234567 + t, ops = 0;
	size_t mine = H.nobj / H.threads;

	while (!atomic_load(&H.done)) {
		pthread_rwlock_rdlock(&H.safepoint);
		for (int n = 0; n < 64; n++) {
			uint64_t id = (rnd(&seed) % mine) * H.threads + t;
			struct object *o = atomic_load(&H.handle[id]);

			if (!o)
				continue;	/* dead */
			/* May fault on a to-space page: the handler resolves it. */
			if (!obj_ok(o, id))
				atomic_fetch_add(&H.bad, 1);
			obj_write(o, id, o->version + 1);
			ops++;
		}
		pthread_rwlock_unlock(&H.safepoint);
	}
	atomic_fetch_add(&H.ops, ops);
	return NULL;
}

/* ---- filling to-space pages ---- */

static void assemble(const struct to_page *tp, uint8_t *buf)
{
	memset(buf, 0, PAGE);
	for (uint32_t i = 0; i < tp->n; i++)
		memcpy(buf + i * OBJ, (const void *)(uintptr_t)tp->piece[i], OBJ);
}

/* Handler: resolve the fault on one to-space page the way the plan says. */
/* Resolve one to-space page the way the plan says. */
static int resolve(struct madvx_uffd *u, int t, uint64_t addr)
{
	static __thread uint8_t buf[PAGE] __attribute__((aligned(PAGE)));
	const struct to_page *tp = &H.plans[t][(addr - (uintptr_t)H.space[t]) / PAGE];

	if (tp->moved) {
		int ret;

		atomic_fetch_add(&H.fault_moves, 1);
		ret = madvx_uffd_move(u, addr, tp->src, PAGE, MADVX_UFFD_RETRY, NULL);
		/*
		 * An empty source: the collector's move_list moved this page
		 * between the fault and now (seen once on the debug test
		 * kernel), and that move filled @addr. Wake the faulting thread.
		 */
		if (ret == -ENOENT)
			ret = madvx_uffd_wake(u, addr, PAGE);
		return ret;
	}
	atomic_fetch_add(&H.fault_copies, 1);
	assemble(tp, buf);
	return madvx_uffd_copy(u, addr, (uintptr_t)buf, PAGE, MADVX_UFFD_RETRY, NULL);
}

/*
 * Handler: resolve the fault on one to-space page. A fault event the
 * handler read just before the collector placed that page itself can be
 * dispatched after the collector ended the cycle (unregistered the to-space,
 * released the from-space, maybe flipped the spaces): it is stale, and the
 * faulting thread was woken when the page was placed. @compacting and
 * @in_fault make that decision race-free (each side stores, then loads the
 * other's flag, all sequentially consistent): either the handler sees the
 * cycle over and only wakes, or the collector waits for it to finish.
 */
static int on_fault(struct madvx_uffd *u, const struct madvx_uffd_event *ev, void *arg)
{
	int t = !atomic_load(&H.from), ret = 0;
	uint64_t addr = ev->arg.fault.addr & ~(PAGE - 1), base = (uintptr_t)H.space[t];

	(void)arg;
	atomic_fetch_add(&H.in_fault, 1);
	if (atomic_load(&H.compacting) && addr >= base && addr < base + H.plan_len * PAGE)
		ret = resolve(u, t, addr);
	else
		madvx_uffd_wake(u, addr, PAGE);
	atomic_fetch_sub(&H.in_fault, 1);
	return ret;
}

static void *handler(void *arg)
{
	struct madvx_uffd_handler h = { .size = sizeof(h), .fault = on_fault };
	int ret = madvx_uffd_run(H.uffd, &h);

	(void)arg;
	if (ret) {
		fprintf(stderr, "handler: %s\n", strerror(-ret));
		atomic_fetch_add(&H.bad, 1);
	}
	return NULL;
}

/* ---- the collector ---- */

/* Is @o (in the from-space) a live object whose handle still points at it? */
static bool live_here(const struct object *o)
{
	return o->id < H.nobj && atomic_load(&H.handle[o->id]) == o;
}

/* Kill objects: about 60% of pages stay dense, in runs; the rest lose half. */
static void kill_objects(uint64_t *seed)
{
	uint8_t *from = H.space[H.from];
	bool dense = true;

	for (size_t p = 0; p < H.pages; p++) {
		if (rnd(seed) % 8 == 0)
			dense = rnd(seed) % 10 < 6;	/* runs of ~8 pages */
		if (dense)
			continue;
		for (size_t s = 0; s < PER_PAGE; s++) {
			struct object *o = (struct object *)(from + p * PAGE + s * OBJ);

			if (live_here(o) && rnd(seed) % 2)
				atomic_store(&H.handle[o->id], NULL);
		}
	}
}


/*
 * Plan the to-space and forward the handles. Mutators are stopped. Once an
 * object's handle is forwarded it no longer counts as live_here() in the
 * from-space, which is how the second pass skips the dense pages.
 */
static void make_plan(void)
{
	uint8_t *from = H.space[H.from], *to = H.space[!H.from];
	size_t k = 0, a;

	/* Dense pages first, in from-space order: their runs stay contiguous. */
	for (size_t p = 0; p < H.pages; p++) {
		size_t live = 0;

		for (size_t s = 0; s < PER_PAGE; s++)
			live += live_here((struct object *)(from + p * PAGE + s * OBJ));
		if (live != PER_PAGE)
			continue;
		H.plan[k] = (struct to_page){ .moved = true, .src = (uintptr_t)from + p * PAGE };
		for (size_t s = 0; s < PER_PAGE; s++) {
			struct object *o = (struct object *)(from + p * PAGE + s * OBJ);

			atomic_store(&H.handle[o->id], (struct object *)(to + k * PAGE + s * OBJ));
		}
		k++;
	}
	H.dense = k;
	/* Then the live objects of the other pages, packed into assembled pages. */
	a = k;
	for (size_t p = 0; p < H.pages; p++) {
		for (size_t s = 0; s < PER_PAGE; s++) {
			struct object *o = (struct object *)(from + p * PAGE + s * OBJ);
			struct to_page *tp = &H.plan[a];

			if (!live_here(o))
				continue;
			tp->piece[tp->n] = (uintptr_t)o;
			atomic_store(&H.handle[o->id],
				     (struct object *)(to + a * PAGE + tp->n * OBJ));
			if (++tp->n == PER_PAGE)
				a++;
		}
	}
	H.plan_len = a + (a < H.pages && H.plan[a].n > 0);
}

static int check_all(const char *when)
{
	uint8_t *to = H.space[!H.from];
	size_t live = 0, bad = 0;

	for (size_t id = 0; id < H.nobj; id++) {
		struct object *o = atomic_load(&H.handle[id]);

		if (!o)
			continue;
		live++;
		if ((uint8_t *)o < to || (uint8_t *)o >= to + H.plan_len * PAGE || !obj_ok(o, id))
			bad++;
	}
	if (bad)
		fprintf(stderr, "%s: %zu of %zu live objects wrong\n", when, bad, live);
	return bad ? -1 : (int)(live > 0 ? 0 : -1);
}

/* One collection cycle; returns 0 or -1 when a check failed. */
static int collect(unsigned int cycle, uint64_t *seed)
{
	uint8_t *from = H.space[H.from], *to = H.space[!H.from];
	size_t len = H.pages * PAGE, nitems = 0, live;
	struct madvx_uffd_item *items;
	struct madvx_uffd_stats st0 = { .size = sizeof(st0) }, st1 = { .size = sizeof(st1) };
	uint64_t t0, t1, t2, t3;
	uint8_t *buf;
	unsigned char vec;
	int ret = 0;

	madvx_uffd_stats_get(H.uffd, &st0);
	t0 = now_ns();
	pthread_rwlock_wrlock(&H.safepoint);		/* safepoint: mutators stopped */
	t1 = now_ns();
	kill_objects(seed);
	H.plan = H.plans[!H.from];
	memset(H.plan, 0, H.pages * sizeof(*H.plan));
	make_plan();
	ret = madvx_uffd_register(H.uffd, (uintptr_t)to, len, MADVX_UFFD_MISSING, NULL);
	atomic_store(&H.compacting, ret == 0);
	pthread_rwlock_unlock(&H.safepoint);		/* mutators run again */
	t2 = now_ns();
	if (ret) {
		fprintf(stderr, "register: %s\n", strerror(-ret));
		return -1;
	}

	/* Dense pages: one 4 KiB item each; the library coalesces the runs. */
	items = calloc(H.dense ? H.dense : 1, sizeof(*items));
	buf = aligned_alloc(PAGE, 16 * PAGE);
	if (!items || !buf)
		return -1;
	for (size_t k = 0; k < H.dense; k++)
		items[nitems++] = (struct madvx_uffd_item){ .dst = (uintptr_t)to + k * PAGE,
			.src = H.plan[k].src, .len = PAGE };
	ret = madvx_uffd_move_list(H.uffd, items, nitems, MADVX_UFFD_RETRY);
	if (ret)
		fprintf(stderr, "move_list: %s\n", strerror(-ret));
	/* Assembled pages, 16 per COPY; pages a fault already placed are skipped. */
	for (size_t k = H.dense; k < H.plan_len && !ret; k += 16) {
		size_t n = H.plan_len - k < 16 ? H.plan_len - k : 16;

		for (size_t i = 0; i < n; i++)
			assemble(&H.plan[k + i], buf + i * PAGE);
		ret = madvx_uffd_copy(H.uffd, (uintptr_t)to + k * PAGE, (uintptr_t)buf, n * PAGE,
				      MADVX_UFFD_RETRY, NULL);
		if (ret)
			fprintf(stderr, "copy: %s\n", strerror(-ret));
	}
	/* The tail of the to-space stays empty: zero pages if someone looks. */
	t3 = now_ns();
	madvx_uffd_stats_get(H.uffd, &st1);

	/* End the cycle for the handler first: see on_fault(). */
	atomic_store(&H.compacting, false);
	while (atomic_load(&H.in_fault))
		sched_yield();
	/* Give the from-space back: MOVE already emptied the dense pages. */
	if (!ret)
		ret = madvx_uffd_unregister(H.uffd, (uintptr_t)to, len);
	if (!ret)
		ret = madvx_release(from, len);
	if (!ret)
		ret = madvx_release_flush();
	if (ret)
		fprintf(stderr, "release: %s\n", strerror(-ret));
	for (size_t p = 0; p < H.pages && !ret; p++) {
		if (mincore(from + p * PAGE, PAGE, &vec) || (vec & 1)) {
			fprintf(stderr, "from-space page %zu still resident\n", p);
			ret = -1;
		}
	}

	pthread_rwlock_wrlock(&H.safepoint);
	if (!ret)
		ret = check_all("after compaction");
	pthread_rwlock_unlock(&H.safepoint);
	live = 0;
	for (size_t id = 0; id < H.nobj; id++)
		live += atomic_load(&H.handle[id]) != NULL;
	printf("cycle %u: pause %.3f ms (safepoint %.3f ms), compaction %.3f ms; "
	       "%zu live objects, %zu pages moved in %llu ioctls total, %zu assembled; "
	       "faults %llu (present on arrival %llu KiB, EAGAIN %llu); heap %zu -> %zu pages\n",
	       cycle, (double)(t2 - t0) / 1e6, (double)(t1 - t0) / 1e6,
	       (double)(t3 - t2) / 1e6, live, H.dense,
	       (unsigned long long)(st1.ioctls - st0.ioctls), H.plan_len - H.dense,
	       (unsigned long long)(st1.faults - st0.faults),
	       (unsigned long long)((st1.existed - st0.existed) / 1024),
	       (unsigned long long)(st1.eagain - st0.eagain), H.pages, H.plan_len);
	free(items);
	free(buf);
	H.from = !H.from;
	return ret ? -1 : 0;
}

static void fill_heap(void)
{
	struct object *o = (struct object *)H.space[0];

	for (size_t id = 0; id < H.nobj; id++) {
		obj_write(&o[id], id, 0);
		atomic_store(&H.handle[id], &o[id]);
	}
}

int main(int argc, char **argv)
{
	struct madvx_uffd_opts uo = { .size = sizeof(uo), .features = MADVX_UFFD_FEATURE_MOVE };
	pthread_t ht, *mt;
	uint64_t seed = 42, t0;
	int ret;

	H.pages = 16384;	/* 64 MiB */
	H.threads = 2;
	H.cycles = 3;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--quick")) {
			H.pages = 2048;
			H.cycles = 2;
		} else if (!strcmp(argv[i], "--pages") && i + 1 < argc) {
			H.pages = strtoul(argv[++i], NULL, 0);
		} else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
			H.threads = (unsigned int)strtoul(argv[++i], NULL, 0);
		} else if (!strcmp(argv[i], "--cycles") && i + 1 < argc) {
			H.cycles = (unsigned int)strtoul(argv[++i], NULL, 0);
		} else {
			fprintf(stderr, "usage: gc-compact [--quick] [--pages N] "
				"[--threads N] [--cycles N]\n");
			return 2;
		}
	}
	if (!H.pages || !H.threads || H.threads > 64)
		return 2;
	H.nobj = H.pages * PER_PAGE / H.threads * H.threads;

	ret = madvx_uffd_open(&uo, &H.uffd);
	if (ret) {
		printf("SKIP: userfaultfd with UFFD_FEATURE_MOVE: %s (missing features 0x%llx)\n",
		       strerror(-ret),
		       (unsigned long long)madvx_uffd_missing_features(MADVX_UFFD_FEATURE_MOVE));
		return 77;
	}
	for (int s = 0; s < 2; s++) {
		H.space[s] = mmap(NULL, H.pages * PAGE, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (H.space[s] == MAP_FAILED)
			return 1;
		/* 4 KiB pages: a THP would be split by the first partial MOVE anyway. */
		madvise(H.space[s], H.pages * PAGE, MADV_NOHUGEPAGE);
	}
	H.handle = calloc(H.nobj, sizeof(*H.handle));
	H.plans[0] = calloc(H.pages, sizeof(*H.plans[0]));
	H.plans[1] = calloc(H.pages, sizeof(*H.plans[1]));
	mt = calloc(H.threads, sizeof(*mt));
	if (!H.handle || !H.plans[0] || !H.plans[1] || !mt)
		return 1;
	{
		pthread_rwlockattr_t a;

		/* Writer preference: the collector's safepoint request must not starve. */
		pthread_rwlockattr_init(&a);
		pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
		pthread_rwlock_init(&H.safepoint, &a);
		pthread_rwlockattr_destroy(&a);
	}
	fill_heap();
	printf("heap %zu pages (%zu MiB), %zu objects of %lu bytes, %u mutator threads\n",
	       H.pages, H.pages * PAGE >> 20, H.nobj, OBJ, H.threads);

	pthread_create(&ht, NULL, handler, NULL);
	for (unsigned int t = 0; t < H.threads; t++)
		pthread_create(&mt[t], NULL, mutator, (void *)(uintptr_t)t);
	t0 = now_ns();
	ret = 0;
	for (unsigned int c = 1; c <= H.cycles && !ret; c++) {
		usleep(20000);		/* let the mutators run between cycles */
		ret = collect(c, &seed);
	}
	atomic_store(&H.done, true);
	for (unsigned int t = 0; t < H.threads; t++)
		pthread_join(mt[t], NULL);
	madvx_uffd_stop(H.uffd, 1);
	pthread_join(ht, NULL);

	H.from = !H.from;	/* check_all() looks at the current to-space */
	if (!ret)
		ret = check_all("at exit");
	printf("%lu mutator operations in %.1f ms, faults resolved by MOVE %lu, by COPY %lu\n",
	       atomic_load(&H.ops), (double)(now_ns() - t0) / 1e6,
	       atomic_load(&H.fault_moves), atomic_load(&H.fault_copies));
	if (atomic_load(&H.bad))
		ret = -1;
	printf("%s\n", ret ? "FAILED" : "verified: every live object intact after every cycle");
	madvx_uffd_free(H.uffd);
	munmap(H.space[0], H.pages * PAGE);
	munmap(H.space[1], H.pages * PAGE);
	free(H.handle);
	free(H.plans[0]);
	free(H.plans[1]);
	free(mt);
	return ret ? 1 : 0;
}
