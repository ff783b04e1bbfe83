/* hvd's C API. Every function returns an hvd_status; on failure hvd_last_error() returns a
 * message for the calling thread that names what failed (rank, peer, variable, value).
 * hvd_init() reads the HVD_* environment set by hvdrun; without it the process is a single rank.
 * Thread-safety: init/shutdown and the collectives must not race each other; the queries and
 * hvd_last_error may be called from any thread. */
#ifndef HVD_HVD_H_
#define HVD_HVD_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  HVD_SUCCESS = 0,
  HVD_INVALID_ARGUMENT = 1, /* bad input: configuration, rank, dtype, pointer */
  HVD_IO_ERROR = 2,         /* a peer died or the network failed */
  HVD_TIMEOUT = 3,          /* a wait ran out; the message names what was missing */
  HVD_INTERNAL_ERROR = 4,   /* a broken invariant */
  HVD_NOT_INITIALIZED = 5   /* called before hvd_init or after hvd_shutdown */
} hvd_status;

/* Codes are fixed: new dtypes are appended. */
typedef enum {
  HVD_UINT8 = 0,
  HVD_INT8,
  HVD_INT16,
  HVD_INT32,
  HVD_INT64,
  HVD_FLOAT16,
  HVD_BFLOAT16,
  HVD_FLOAT32,
  HVD_FLOAT64,
  HVD_BOOL,
  HVD_UINT16 = 10
} hvd_dtype;

/* HVD_ADASUM: allreduce only, float dtypes, a power-of-two number of ranks, host memory. */
typedef enum { HVD_SUM = 0, HVD_AVERAGE, HVD_MIN, HVD_MAX, HVD_PRODUCT, HVD_ADASUM } hvd_reduce_op;

/* Joins the job. A second call while initialised does nothing. */
hvd_status hvd_init(void);
/* Leaves the job; hvd_init may be called again afterwards. */
hvd_status hvd_shutdown(void);
hvd_status hvd_is_initialized(int* out);

hvd_status hvd_rank(int* out);
hvd_status hvd_size(int* out);
hvd_status hvd_local_rank(int* out);
hvd_status hvd_local_size(int* out);
hvd_status hvd_cross_rank(int* out);
hvd_status hvd_cross_size(int* out);

/* sendbuf may equal recvbuf (in place). */
hvd_status hvd_allreduce(const void* sendbuf, void* recvbuf, size_t count, hvd_dtype dtype,
                         hvd_reduce_op op);
hvd_status hvd_broadcast(void* buf, size_t count, hvd_dtype dtype, int root);
hvd_status hvd_barrier(void);

/* The calling thread's message for its last failed call ("" if none). */
const char* hvd_last_error(void);
const char* hvd_status_string(hvd_status status);

#ifdef __cplusplus
}
#endif

#endif /* HVD_HVD_H_ */
