// SPDX-License-Identifier: MIT
/*
 * madvx_release(): a per-thread batch for callers (GC runtimes) that just
 * want memory gone without managing a batch. Flush policy: pending bytes
 * reach the threshold or the batch is full, madvx_release_flush(), thread exit.
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "proc.h"
#include "sys.h"

#define RELEASE_CAPACITY 1024
#define RELEASE_FLUSH_BYTES (1ULL << 20)

struct release_state {
	struct madvx_batch *batch;
	int advice;
	uint64_t flush_bytes;
	uint64_t pending_bytes;
	int err;		/* first failure since the last madvx_release_flush() */
};

static __thread struct release_state tls_release;
static pthread_key_t release_key;
static struct madvx_once release_key_once = MADVX_ONCE_INIT;

static void release_flush_into_err(struct release_state *rs)
{
	int ret;

	if (!rs->batch || !madvx_batch_pending(rs->batch))
		return;
	ret = madvx_batch_flush(rs->batch);
	rs->pending_bytes = 0;
	if (ret && !rs->err)
		rs->err = ret;
}

/* Thread exit: apply what is pending (failures land in madvx_stats_get()). */
static void release_thread_exit(void *arg)
{
	struct release_state *rs = arg;

	release_flush_into_err(rs);
	madvx_batch_free(rs->batch);
	rs->batch = NULL;
}

static void release_key_init(void)
{
	pthread_key_create(&release_key, release_thread_exit);
}

static int release_state_get(struct release_state **out)
{
	struct release_state *rs = &tls_release;
	struct madvx_batch_opts o = {
		.size = sizeof(o),
		.capacity = RELEASE_CAPACITY,
		.flags = MADVX_BATCH_AUTOFLUSH,
	};
	int ret;

	if (likely(rs->batch)) {
		*out = rs;
		return 0;
	}
	madvx_once(&release_key_once, release_key_init);
	ret = madvx_batch_create(&o, &rs->batch);
	if (ret)
		return ret;
	if (!rs->advice)
		rs->advice = MADV_DONTNEED;
	if (!rs->flush_bytes)
		rs->flush_bytes = RELEASE_FLUSH_BYTES;
	pthread_setspecific(release_key, rs);
	*out = rs;
	return 0;
}

MADVX_API int madvx_release(void *addr, size_t len)
{
	struct release_state *rs;
	int ret = release_state_get(&rs);

	if (ret)
		return ret;
	ret = madvx_batch_add(rs->batch, addr, len, rs->advice);
	if (ret < 0)
		return ret;
	/* One pending hint: the batch was empty, or full and flushed itself first. */
	if (madvx_batch_pending(rs->batch) == 1)
		rs->pending_bytes = 0;
	rs->pending_bytes += len;
	if (rs->pending_bytes >= rs->flush_bytes)
		release_flush_into_err(rs);
	return 0;
}

MADVX_API int madvx_release_flush(void)
{
	struct release_state *rs = &tls_release;
	int ret;

	release_flush_into_err(rs);
	ret = rs->err;
	rs->err = 0;
	return ret;
}

MADVX_API uint64_t madvx_release_pending(void)
{
	const struct release_state *rs = &tls_release;

	return rs->batch && madvx_batch_pending(rs->batch) ? rs->pending_bytes : 0;
}

MADVX_API int madvx_release_config(const struct madvx_release_opts *opts)
{
	struct madvx_release_opts o = { .size = sizeof(o) };
	struct release_state *rs = &tls_release;

	int ret;

	if (!opts)
		return -EINVAL;
	ret = madvx_opts_in(&o, sizeof(o), opts, offsetof(struct madvx_release_opts, advice));
	if (ret)
		return ret;
	if (o.__reserved0)
		return -E2BIG;
	if (o.advice && o.advice != MADV_DONTNEED && o.advice != MADV_FREE)
		return -EINVAL;
	release_flush_into_err(rs);
	rs->advice = o.advice ? o.advice : MADV_DONTNEED;
	rs->flush_bytes = o.flush_bytes ? o.flush_bytes : RELEASE_FLUSH_BYTES;
	return 0;
}
