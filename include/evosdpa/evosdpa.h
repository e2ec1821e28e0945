/*
 * evosdpa C ABI: fused scaled-dot-product attention forward on NVIDIA GPUs.
 *
 *   O = softmax(scale * Q K^T [+ causal mask]) V
 *
 * Tensors are device pointers viewed as [batch, heads, seq, head_dim] with explicit strides in
 * elements for the first three dimensions; head_dim is contiguous (stride 1). This covers both
 * BHSD ([B,H,L,D] contiguous) and BSHD ([B,L,H,D] contiguous) layouts.
 *
 * The call neither synchronises the host nor allocates memory, so it can be captured in a CUDA graph.
 * Every function returns a status; evosdpa_last_error_message() gives the reason for the last failure
 * on the calling thread.
 */
#ifndef EVOSDPA_EVOSDPA_H
#define EVOSDPA_EVOSDPA_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define EVOSDPA_VERSION_MAJOR 0
#define EVOSDPA_VERSION_MINOR 1
#define EVOSDPA_VERSION_PATCH 0

typedef enum evosdpa_status {
  EVOSDPA_SUCCESS = 0,
  EVOSDPA_ERROR_INVALID_ARGUMENT = 1, /* null pointer, negative size, bad stride, bad enum value */
  EVOSDPA_ERROR_NOT_SUPPORTED = 2,    /* valid request that no (or not the named) kernel can run */
  EVOSDPA_ERROR_NO_DEVICE = 3,        /* no CUDA device or driver */
  EVOSDPA_ERROR_DEVICE = 4,           /* device too old, or a pointer on the wrong device */
  EVOSDPA_ERROR_CUDA = 5              /* a CUDA runtime call or the launch failed */
} evosdpa_status_t;

typedef enum evosdpa_dtype {
  EVOSDPA_DTYPE_FLOAT16 = 0,
  EVOSDPA_DTYPE_BFLOAT16 = 1
} evosdpa_dtype_t;

/*
 * Causal masking. Query i may attend key j when:
 *   NONE:         always;
 *   TOP_LEFT:     j <= i                      (PyTorch SDPA is_causal=True);
 *   BOTTOM_RIGHT: j <= i + seqlen_k - seqlen_q (FlashAttention causal=True).
 * The two alignments agree when seqlen_q == seqlen_k.
 */
typedef enum evosdpa_causal {
  EVOSDPA_CAUSAL_NONE = 0,
  EVOSDPA_CAUSAL_TOP_LEFT = 1,
  EVOSDPA_CAUSAL_BOTTOM_RIGHT = 2
} evosdpa_causal_t;

/*
 * Arguments of one attention forward call. Fill with evosdpa_params_init() first.
 *
 * Q and O are [batch, heads_q, seqlen_q, head_dim]; K and V are [batch, heads_kv, seqlen_k, head_dim].
 * heads_q must be a multiple of heads_kv (grouped-query attention; heads_kv == heads_q is plain MHA).
 * O has the dtype of Q/K/V. lse, when not NULL, receives the float32 natural-log log-sum-exp of the
 * scaled, masked scores, contiguous [batch, heads_q, seqlen_q].
 *
 * A query row with no key to attend (seqlen_k == 0, or every key masked by a bottom-right causal mask
 * when seqlen_q > seqlen_k) gets O = 0 and lse = -inf: the log of an empty sum.
 *
 * softmax_scale: 0 (the value set by evosdpa_params_init) means 1/sqrt(head_dim); any other finite
 * value is used as given.
 *
 * A pointer may be NULL only when its tensor has no elements.
 */
typedef struct evosdpa_params {
  const void* q;
  const void* k;
  const void* v;
  void* o;
  float* lse;

  evosdpa_dtype_t dtype;
  int64_t batch;
  int64_t heads_q;
  int64_t heads_kv;
  int64_t seqlen_q;
  int64_t seqlen_k;
  int64_t head_dim;

  /* Strides in elements. */
  int64_t q_batch_stride, q_head_stride, q_seq_stride;
  int64_t k_batch_stride, k_head_stride, k_seq_stride;
  int64_t v_batch_stride, v_head_stride, v_seq_stride;
  int64_t o_batch_stride, o_head_stride, o_seq_stride;

  float softmax_scale;
  evosdpa_causal_t causal;
} evosdpa_params_t;

/* Zero pointers and sizes, fp16, no causal mask, default scale. */
void evosdpa_params_init(evosdpa_params_t* params);

/* Set the strides of all four tensors for a contiguous BHSD ([B,H,L,D]) layout from the sizes. */
void evosdpa_params_set_bhsd_strides(evosdpa_params_t* params);

/* Set the strides of all four tensors for a contiguous BSHD ([B,L,H,D]) layout from the sizes. */
void evosdpa_params_set_bshd_strides(evosdpa_params_t* params);

/*
 * Run attention forward on `stream` (a cudaStream_t; NULL is the legacy default stream) on the current
 * device. `kernel` is NULL or "auto" for the fastest kernel that supports the device and the arguments,
 * or a kernel name from evosdpa_kernel_name(), which is then required to support them.
 */
evosdpa_status_t evosdpa_attention_forward(const evosdpa_params_t* params, const char* kernel,
                                           void* stream);

/*
 * Whether evosdpa_attention_forward would accept these arguments with this kernel (NULL or "auto": with
 * any kernel) on the current device. Checks everything the forward call checks, pointers included, and
 * launches nothing. EVOSDPA_SUCCESS means supported; otherwise the message says why not. When
 * `selected` is not NULL it receives the name of the kernel dispatch would run.
 */
evosdpa_status_t evosdpa_supports(const evosdpa_params_t* params, const char* kernel,
                                  const char** selected);

/* Kernel names, index 0 .. evosdpa_kernel_count()-1, fastest first. */
int evosdpa_kernel_count(void);
const char* evosdpa_kernel_name(int index);

/* The reason for the last failed call on this thread ("" after a success). */
const char* evosdpa_last_error_message(void);

/* A fixed name for a status ("EVOSDPA_ERROR_INVALID_ARGUMENT", ...). */
const char* evosdpa_status_string(evosdpa_status_t status);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* EVOSDPA_EVOSDPA_H */
