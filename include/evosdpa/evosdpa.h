/*
 * evosdpa C ABI: fused scaled-dot-product attention on NVIDIA GPUs, forward and backward.
 *
 *   O = softmax(mask(cap(scale * Q K^T) + bias)) V   (cap: optional softcap; mask: causal, sliding window,
 *   lengths, a boolean mask tensor; bias: an additive mask tensor, ALiBi)
 *   backward: dQ, dK, dV from Q, K, V, O, dO and the forward's log-sum-exp
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

#ifdef __CUDACC_RTC__ /* NVRTC (evosdpa-tune's run-time candidates): libcu++ stands in for the C library */
#include <cuda/std/cstddef>
#include <cuda/std/cstdint>
#else
#include <stddef.h>
#include <stdint.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define EVOSDPA_VERSION_MAJOR 0
#define EVOSDPA_VERSION_MINOR 9
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
  EVOSDPA_DTYPE_BFLOAT16 = 1,
  EVOSDPA_DTYPE_FLOAT8_E4M3 = 2 /* inputs only (PyTorch float8_e4m3fn: max 448, no infinities), with descales */
} evosdpa_dtype_t;

/* Bytes per element of a dtype; 0 for a value that is not an evosdpa_dtype_t. */
size_t evosdpa_dtype_size(evosdpa_dtype_t dtype);

/* Sequence lengths above this are refused (NOT_SUPPORTED): kernels index tokens with 32-bit integers
 * and add tile sizes to them, which must not overflow. 2^30 tokens. */
#define EVOSDPA_MAX_SEQLEN ((int64_t)1 << 30)

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
 * How the backward pass sums dQ over key blocks (since 0.4).
 *   DETERMINISTIC (the zero default): dQ is summed over key blocks in a fixed order (wgmma_sm90,
 *     mma_sm80: the blocks take turns per query tile), so every run gives bitwise the same dQ, dK and dV.
 *   FAST: dQ is summed in a float32 workspace with atomic adds, in whatever order blocks arrive
 *     (FlashAttention-2's default): faster (no turns to wait for), and dQ may differ between runs in
 *     its last bits. dK and dV are bitwise repeatable in both modes.
 */
typedef enum evosdpa_backward_mode {
  EVOSDPA_BACKWARD_DETERMINISTIC = 0,
  EVOSDPA_BACKWARD_FAST = 1
} evosdpa_backward_mode_t;

/* What a mask tensor's elements are (since 0.8; see "Mask tensors"). */
typedef enum evosdpa_mask_type {
  EVOSDPA_MASK_NONE = 0,
  EVOSDPA_MASK_BOOL = 1,    /* one byte per element, nonzero: the query may see the key */
  EVOSDPA_MASK_ADDITIVE = 2 /* the inputs' dtype, added to the scaled score; -inf masks */
} evosdpa_mask_type_t;

/*
 * Arguments of one attention forward call. Fill with evosdpa_params_init() first.
 *
 * Q and O are [batch, heads_q, seqlen_q, head_dim]; K and V are [batch, heads_kv, seqlen_k, head_dim].
 * heads_q must be a multiple of heads_kv (grouped-query attention; heads_kv == heads_q is plain MHA).
 * O has the dtype of Q/K/V (with FP8 inputs: o_dtype, see below). lse, when not NULL, receives the float32 natural-log log-sum-exp of the
 * scaled, masked scores, contiguous [batch, heads_q, seqlen_q].
 *
 * A query row with no key to attend (seqlen_k == 0, or every key masked by a bottom-right causal mask
 * when seqlen_q > seqlen_k) gets O = 0 and lse = -inf: the log of an empty sum.
 *
 * softmax_scale: NaN (the value set by evosdpa_params_init) means 1/sqrt(head_dim); any finite value,
 * 0 and negative values included, is used as given, up to a magnitude of FLT_MAX / log2(e) (about
 * 2.36e38: the kernels work in the log2 domain, scale * log2(e)); an infinite or larger one is refused
 * (INVALID_ARGUMENT).
 *
 * A pointer may be NULL only when its tensor has no elements. The outputs (o over its whole span, lse)
 * must not share a byte with the spans of q, k, v, the descales or with each other (INVALID_ARGUMENT
 * otherwise): a kernel writes O while other blocks still read K and V. Inputs may overlap each other freely.
 *
 * FP8 inputs (dtype EVOSDPA_DTYPE_FLOAT8_E4M3): q, k and v hold E4M3 values x and the real input is
 * x * descale, with float32 descales read from device memory at run time (so a CUDA graph replays with
 * new scales), as FlashAttention-3 and cuDNN define them. q_descale, k_descale and v_descale are all
 * required (a missing one is INVALID_ARGUMENT, never taken as 1). Each is read at
 *   descale[b * descale_batch_stride + h_kv * descale_head_stride]
 * for batch b and key/value head h_kv (a query head's h_kv for q: FlashAttention-3's (batch, heads_kv)
 * shape), so strides 0 give one scale per tensor. O is o_dtype (EVOSDPA_DTYPE_FLOAT16, the zero default,
 * or EVOSDPA_DTYPE_BFLOAT16); lse is that of the real (dequantised) scores. The descales must be finite
 * and positive, which the library cannot check without reading device memory. With fp16/bf16 inputs the
 * descale fields must be NULL/0 and o_dtype 0 or the inputs' dtype (INVALID_ARGUMENT otherwise).
 *
 * How the struct grows (the ABI rule): fields are only ever appended, never removed, reordered or
 * retyped, and every appended field means "off" or "default" when it is zero. struct_size says which
 * fields the caller knows. The library accepts a smaller struct_size (an older caller: the fields it
 * lacks take their zero defaults) down to the size of the first release that had struct_size, and a
 * larger one (a newer caller) only if every byte beyond the fields it knows is zero (the caller uses
 * no feature this library lacks); otherwise NOT_SUPPORTED names both sizes. A struct_size that no header
 * makes (not a multiple of 8, or above 4096 bytes: an uninitialised struct, most likely) is refused with
 * INVALID_ARGUMENT before any byte past the first field is read.
 */
typedef struct evosdpa_params {
  size_t struct_size; /* sizeof the struct the caller compiled against; set by evosdpa_params_init */

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

  /* Since 0.3: FP8 inputs (see above). */
  evosdpa_dtype_t o_dtype;
  const float* q_descale;
  const float* k_descale;
  const float* v_descale;
  int64_t descale_batch_stride, descale_head_stride; /* in floats; 0 and 0: one scale per tensor */

  /* Since 0.4: the backward pass (evosdpa_attention_backward; the forward reads only workspace and
   * workspace_size, since 0.5, for its split-KV partials). */
  const void* dout; /* dO: the gradient of O, [batch, heads_q, seqlen_q, head_dim] in the dtype */
  void* dq;         /* dQ: written, Q's shape */
  void* dk;         /* dK: written, K's shape (summed over the query heads of each group) */
  void* dv;         /* dV: written, V's shape (likewise) */
  int64_t dout_batch_stride, dout_head_stride, dout_seq_stride;
  int64_t dq_batch_stride, dq_head_stride, dq_seq_stride;
  int64_t dk_batch_stride, dk_head_stride, dk_seq_stride;
  int64_t dv_batch_stride, dv_head_stride, dv_seq_stride;
  void* workspace;       /* device scratch of at least evosdpa_backward_workspace_size() bytes, 16-byte aligned */
  size_t workspace_size; /* its size in bytes */
  evosdpa_backward_mode_t backward_mode;

  /* Since 0.5: a KV cache (see "Serving" below). */
  const int32_t* seqused_k;        /* NULL, or device int32 [batch]: keys each sequence attends to */
  const int32_t* page_table;       /* NULL (K, V dense), or device int32 [batch, ceil(seqlen_k / page_size)] */
  int64_t page_table_batch_stride; /* in int32s, >= ceil(seqlen_k / page_size) */
  int64_t page_size;               /* keys per page (a multiple of 16) with a page_table, else 0 */
  int64_t num_pages;               /* pages in the cache K and V point to, with a page_table, else 0 */
  int64_t num_splits;              /* forward key splits: 0 the library's choice, 1 none, N > 1 exactly N */
  /* Since 0.6: variable-length (packed) sequences (see "Variable-length batches" below). */
  const int32_t* cu_seqlens_q; /* NULL, or device int32 [batch + 1]: sequence b is rows cu[b] .. cu[b+1]-1 of q, o */
  const int32_t* cu_seqlens_k; /* NULL, or device int32 [batch + 1]: the same for the rows of k and v */
  int64_t total_q;             /* rows of the packed q and o with cu_seqlens_q, else 0 */
  int64_t total_k;             /* rows of the packed k and v with cu_seqlens_k, else 0 */
  /* Since 0.7: a sliding window and a logit softcap (see "Sliding window and softcap" below). */
  int64_t window_left;    /* with sliding_window: keys before the diagonal a query sees (>= 0), or -1 for all */
  int64_t window_right;   /* with sliding_window: keys after the diagonal a query sees (>= 0), or -1 for all */
  int32_t sliding_window; /* 0: no window (window_left and window_right must be 0); 1: they apply */
  float softcap;          /* 0: none; c > 0: each scaled score s becomes c * tanh(s / c) before the softmax */
  /* Since 0.8: a mask tensor (see "Mask tensors" below). */
  const void* mask;          /* NULL: none; else device [batch|1, heads_q|1, seqlen_q, seqlen_k], keys contiguous */
  int64_t mask_batch_stride; /* in elements; 0 broadcasts one mask over the batch */
  int64_t mask_head_stride;  /* in elements; 0 broadcasts over the query heads */
  int64_t mask_seq_stride;   /* in elements between query rows; 0 broadcasts a key mask over the queries */
  int32_t mask_type;         /* evosdpa_mask_type_t: NONE (with mask NULL), BOOL or ADDITIVE */
  /* Since 0.9: ALiBi (see "ALiBi" below). */
  const float* alibi_slopes;  /* NULL: none; else device float32 [batch|1, heads_q], the heads contiguous */
  int64_t alibi_batch_stride; /* in elements between batch entries' slopes; 0: one set for every entry */
  /* New fields go here, zero meaning off/default (see above). */
} evosdpa_params_t;

/*
 * Serving (since 0.5): a KV cache with per-sequence lengths, paged, read by split-KV decoding.
 *
 * seqused_k: sequence b attends to keys 0 .. seqused_k[b]-1 only (FlashAttention's seqused_k, its
 *   kvcache's cache_seqlens); seqlen_k is then the largest length any sequence may have. A bottom-right
 *   causal mask aligns each sequence's queries with its own last key: query i sees key j when
 *   j <= i + seqused_k[b] - seqlen_q (the decode convention: the seqlen_q new tokens are the last ones
 *   of the cache, appended by the caller before the call). The values are device memory, read by the
 *   kernel: a value outside [0, seqlen_k] is clamped into it.
 * page_table: K and V are a paged cache of num_pages pages of page_size keys. The k_/v_ stride fields
 *   then describe the cache: *_batch_stride is the stride between pages, *_head_stride and *_seq_stride
 *   are within a page (FlashAttention's [num_pages, page_size, heads_kv, head_dim] cache: page stride
 *   page_size * heads_kv * head_dim, head stride head_dim, seq stride heads_kv * head_dim; the head-major
 *   [num_pages, heads_kv, page_size, head_dim] works as well). Key j of sequence b is row j % page_size
 *   of page page_table[b * page_table_batch_stride + j / page_size]. page_size must be a multiple of
 *   16 (vLLM's and FlashInfer's 16 included), so that every 16 aligned keys share a page. The table is
 *   device memory, read by the kernel: an entry outside [0, num_pages) is never dereferenced, and the
 *   keys of that page count as masked (as if past the sequence end).
 * num_splits: how many parts the keys of each (sequence, K/V head) are split into, each computed by its
 *   own block and merged through the log-sum-exp, so that a few sequences with a long cache still fill
 *   the GPU. 0 lets the library choose (as many as the workspace holds; none without one), 1 asks for
 *   no split, N > 1 for N (capped at the number of key blocks). Only the split-KV kernel
 *   (splitkv_sm80) splits; other kernels refuse N > 1.
 * workspace, workspace_size: the forward reads them too (since 0.5; only from callers whose struct_size
 *   covers num_splits, so a 0.4 caller's backward workspace is never the forward's): device scratch for
 *   the split partials, evosdpa_forward_workspace_size() bytes for the library's choice (0 when it would
 *   not split). With a smaller workspace and num_splits 0 the library splits less (not at all without a
 *   workspace pointer); num_splits N > 1 needs the workspace for N (INVALID_ARGUMENT otherwise).
 *   "wgmma_sm90" uses 16 bytes of it for calls whose sequences have lengths of their own (cu_seqlens_q,
 *   cu_seqlens_k, seqused_k): a counter from which its blocks claim work, so that sequences of unequal
 *   lengths keep every SM busy to the end; without a workspace it deals the work in a fixed order (the
 *   same results, bitwise, more slowly when lengths differ). The call zeroes the counter itself (a
 *   memset on the stream); the contents need no preparation.
 *
 * page_table and num_splits > 1 are served by the kernels "splitkv_sm80" and "reference" (no split), which
 * "auto" picks for them; seqused_k by those and "wgmma_sm90" and "mma_sm80" too ("auto": splitkv_sm80 for
 * up to 16 queries per sequence, else the dense kernels: a chunk of prefill against a cache). The others
 * refuse them (NOT_SUPPORTED).
 */

/*
 * Variable-length batches (since 0.6): the sequences of a batch packed one after another, without
 * padding (FlashAttention's varlen convention).
 *
 * cu_seqlens_q: q and o hold total_q rows ([total_q, heads_q, head_dim] at the head and seq strides;
 *   q_batch_stride and o_batch_stride must be 0; total_q at most 2^31-1) and sequence b's queries are rows
 *   cu_seqlens_q[b] .. cu_seqlens_q[b+1]-1 (a contiguous int32 array); seqlen_q is the longest sequence's
 *   length (FlashAttention's max_seqlen_q). The lse, when asked for, is then float32 [heads_q, total_q]
 *   (FlashAttention 2.4+ and 3). Rows of o and lse that belong to no sequence are not written.
 * cu_seqlens_k: the same for k and v (total_k rows, k_batch_stride and v_batch_stride 0, seqlen_k the
 *   longest). Either may come alone (packed queries against padded keys, or the reverse). Not with a
 *   page_table (a paged cache is addressed through its table; seqused_k gives the lengths there); with
 *   seqused_k, sequence b attends to the first min(its length, seqused_k[b]) of its keys, and a
 *   bottom-right mask aligns its last query with the last of those.
 * Causal masks apply per sequence: top-left aligns query i with key i of its own sequence, bottom-right
 *   its last query with its last key (FlashAttention's varlen causal).
 * The arrays are device memory, read by the kernel (the library cannot check them before the launch):
 *   they must start at 0 and not decrease, with the last entry the total (decreasing entries give two
 *   sequences the same rows, whose result is then undefined, though in bounds). A value outside [0, total]
 *   is clamped into it, an end below its start is taken as the start (an empty sequence), and a sequence
 *   longer than seqlen_q (seqlen_k) computes its first seqlen_q queries (sees its first seqlen_k keys) only,
 *   its causal diagonal placed by those counts, so that no byte outside the tensors is ever read or written.
 *
 * cu_seqlens_q and cu_seqlens_k are served by the kernels "wgmma_sm90" (16-bit inputs), "mma_sm80" and
 * "reference"; the forward only (the backward refuses them, NOT_SUPPORTED).
 */

/*
 * Sliding window and softcap (since 0.7), FlashAttention's window_size and softcap.
 *
 * sliding_window = 1: query i sees key j only when
 *     i + offset - window_left <= j <= i + offset + window_right
 *   (a bound of -1 is no bound on its side), on top of the causal mask and the sequence's own keys. offset
 *   places the diagonal: 0 with a TOP_LEFT causal mask, else seqlen_k - seqlen_q (bottom-right, also
 *   without a causal mask: FlashAttention's alignment), per sequence with cu_seqlens or seqused_k as for
 *   causal masks. Mistral's and Gemma's sliding window of W keys, the query's own included, is
 *   window_left = W - 1 with a causal mask. sliding_window other than 0 or 1, a bound below -1, or a
 *   bound other than 0 without sliding_window: INVALID_ARGUMENT.
 * softcap = c > 0: the scaled score s = scale * q.k becomes c * tanh(s / c) (Gemma 2's logit soft-capping)
 *   before the masks and the softmax; the lse is that of the capped scores. 0 is none; a negative,
 *   infinite or NaN value: INVALID_ARGUMENT.
 * A row that sees no key (a window past the sequence's keys) gets O = 0 and lse = -inf, as always.
 *
 * Served by "wgmma_sm90" and "mma_sm80" (fp16 and bf16 inputs; a softcap of at most 2048, whose tanh
 * they take from one exponential, within about 1.7e-7 * c of the exact score, and one for which
 * 2 * scale * log2(e) / c is a float) and "reference" (any); the others refuse them (NOT_SUPPORTED), as
 * does the backward pass.
 */

/*
 * Mask tensors (since 0.8), PyTorch scaled_dot_product_attention's attn_mask.
 *
 * mask: element (b, h, i, j), at mask + b * mask_batch_stride + h * mask_head_stride + i * mask_seq_stride
 *   + j (strides in elements, 0 broadcasting a dimension of size 1: [1, 1, seqlen_q, seqlen_k], a key
 *   padding mask [batch, 1, 1, seqlen_k] with mask_seq_stride 0, ...), applies to query i of head h and
 *   key j of batch entry b. mask_type says what the elements are:
 *   EVOSDPA_MASK_BOOL: one byte each (C bool, torch.bool), nonzero where the query may see the key;
 *   EVOSDPA_MASK_ADDITIVE: of the inputs' dtype (fp16 or bf16), added to the scaled (and softcapped)
 *     score before the softmax; -inf masks the key.
 *   The mask applies on top of the causal mask, the sliding window and the sequence's keys. A row that
 *   sees no key, or whose every score is -inf, gets O = 0 and lse = -inf (as FlashAttention and PyTorch's
 *   SDPA since 2.5, whose math backend gave NaN before). A finite bias such as -65504 (transformers'
 *   fp16 finfo.min) is a bias like any other: the row's softmax runs over its biased scores. Known
 *   limit, for biases beyond about +-7.4e8 (2^30 ln 2; bf16 holds them, fp16 stops at 65504): on
 *   "mma_sm80" and "wgmma_sm90" one whose product with log2(e) (on "wgmma_sm90" without a softcap,
 *   with 1 / softmax_scale) leaves float's range, bf16's finfo.min (-3.39e38) among them, hides its key
 *   like -inf; on "wgmma_sm90" without a softcap a row whose largest biased score lies beyond +-7.4e8
 *   gets O = 0 and lse = -inf, as a row that sees no key (keys below -7.4e8 beside one above it weigh
 *   nothing anyway). "reference", and "mma_sm80" within float's range, run the softmax over such scores
 *   (a row all at one large bias: the average of V). Never NaN from a finite bias.
 * A mask without mask_type, a mask_type without a mask, a mask_type other than these, or a negative
 *   stride: INVALID_ARGUMENT. Not with FP8 inputs, cu_seqlens_q/k, seqused_k or a page_table, nor in the
 *   backward (NOT_SUPPORTED). The mask is device memory the kernels read (never written); it may not
 *   overlap o or lse.
 * Served by "wgmma_sm90" (fp16 and bf16 inputs; the mask's pointer and its non-zero strides 16-byte
 *   aligned, since it copies the mask in 16-byte chunks; with a sliding window, a softcap or both, or
 *   ALiBi, and a softmax_scale of magnitude above about 2e-39, whose reciprocal it multiplies the bias
 *   by), "mma_sm80" (the pointer and non-zero strides aligned to a pair of elements; with a sliding
 *   window, a softcap or both, or ALiBi, any scale) and "reference" (everything above); the others refuse
 *   it (NOT_SUPPORTED).
 */

/*
 * ALiBi (since 0.9), FlashAttention's alibi_slopes (Press et al., "Train Short, Test Long").
 *
 * alibi_slopes: query i of head h of batch entry b adds
 *     -alibi_slopes[b * alibi_batch_stride + h] * |i + offset - j|
 *   to its scaled (and softcapped) score of key j, beside an additive mask tensor; offset places the
 *   diagonal as for the sliding window (0 with a TOP_LEFT causal mask, else seqlen_k - seqlen_q, per
 *   sequence with cu_seqlens or seqused_k). The lse is that of the biased scores. (FlashAttention 2 with
 *   a causal mask adds slope * j instead, which differs from this by a constant per row: the same O, its
 *   lse larger by slope * (i + offset).) The slopes are device float32 memory the kernels read, one per
 *   query head (heads contiguous), alibi_batch_stride (>= 0, elements) apart per batch entry, 0 for one
 *   set shared by the batch; 4-byte aligned, not overlapping o or lse. A stride without slopes, a negative
 *   stride or a misaligned pointer: INVALID_ARGUMENT; FP8 inputs or the backward: NOT_SUPPORTED.
 * Served by "wgmma_sm90" (fp16 and bf16 inputs, padded or packed batches, seqused_k; a mask tensor but no
 *   sliding window or softcap with it, and a softmax_scale of magnitude above about 2e-39),
 *   "mma_sm80" (the same, any scale) and "reference" (everything above, a page_table included); the
 *   others refuse it (NOT_SUPPORTED).
 */

/*
 * Set struct_size, zero pointers and sizes, fp16, no causal mask, default scale (NaN), for a struct of
 * `struct_size` bytes. FFI users that mirror the struct call this with their mirror's size; C and C++
 * callers use evosdpa_params_init(). INVALID_ARGUMENT (and nothing written) for NULL or a size below
 * the smallest struct this library accepts.
 */
evosdpa_status_t evosdpa_params_init_sized(evosdpa_params_t* params, size_t struct_size);

/* evosdpa_params_init_sized with the size of the struct in the header the caller compiled against. */
static inline void evosdpa_params_init(evosdpa_params_t* params) {
  (void)evosdpa_params_init_sized(params, sizeof(evosdpa_params_t));
}

/* Set the strides of every tensor (q, k, v, o and dout, dq, dk, dv) for a contiguous BHSD ([B,H,L,D])
 * layout from the sizes. With cu_seqlens_q (cu_seqlens_k) set first, q and o (k and v) are the packed
 * [H, total, D] (batch stride 0). */
void evosdpa_params_set_bhsd_strides(evosdpa_params_t* params);

/* The same for a contiguous BSHD ([B,L,H,D]) layout; packed sequences are [total, H, D] (FlashAttention's
 * varlen layout). */
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

/*
 * The backward pass (since 0.4): dQ, dK and dV of the attention the same params describe, given
 *   q, k, v   the forward's inputs;
 *   o         the forward's output (read: the pre-pass forms D = rowsum(dO * O) from it);
 *   lse       the forward's log-sum-exp (read, required: float32 [batch, heads_q, seqlen_q] contiguous,
 *             -inf for rows with no visible key), so P = exp(scale Q K^T - lse) is recomputed, not stored;
 *   dout      dO, the gradient of O;
 * and softmax_scale and causal as in the forward call. dq, dk and dv are written in the dtype (fp16 or
 * bf16; FP8 inputs are NOT_SUPPORTED), each over its whole tensor: rows with no visible key get dQ = 0,
 * keys no query sees get dK = dV = 0, and with seqlen_q == 0 dK and dV are zero-filled.
 * With grouped-query heads dK and dV are the sums over the query heads that share each K/V head.
 *
 * workspace: device memory of at least evosdpa_backward_workspace_size() bytes (16-byte aligned; NULL
 * when that size is 0). Its contents need not be initialised and are scratch after the call; the call
 * allocates nothing and does not synchronise the host, so it can be captured in a CUDA graph.
 *
 * The spans (first to last byte) of the outputs dq, dk, dv and of the workspace must not overlap any
 * input's (q, k, v, o, lse, dout) or each other's (INVALID_ARGUMENT): interleaved gradients such as a
 * packed dKV [B, L, 2, H, D], whose spans overlap though no byte is shared, are refused too.
 * `kernel` as in evosdpa_attention_forward.
 */
evosdpa_status_t evosdpa_attention_backward(const evosdpa_params_t* params, const char* kernel, void* stream);

/* Bytes of workspace evosdpa_attention_backward needs for these params (workspace and workspace_size
 * are not read) and kernel, on the current device. */
evosdpa_status_t evosdpa_backward_workspace_size(const evosdpa_params_t* params, const char* kernel,
                                                 size_t* bytes);

/* Bytes of workspace evosdpa_attention_forward would use for these params and kernel (workspace and
 * workspace_size are not read) on the current device: 0 unless the chosen kernel splits keys through it
 * (since 0.5) or claims work from a counter in it (wgmma_sm90); see "Serving" above. */
evosdpa_status_t evosdpa_forward_workspace_size(const evosdpa_params_t* params, const char* kernel,
                                                size_t* bytes);

/* Whether evosdpa_attention_backward would accept these arguments (the workspace included), as
 * evosdpa_supports does for the forward. */
evosdpa_status_t evosdpa_supports_backward(const evosdpa_params_t* params, const char* kernel,
                                           const char** selected);

/* Kernel names, index 0 .. evosdpa_kernel_count()-1, fastest first. */
int evosdpa_kernel_count(void);
const char* evosdpa_kernel_name(int index);

/* The reason for the last failed call on this thread ("" after a success). */
const char* evosdpa_last_error_message(void);

/* A fixed name for a status ("EVOSDPA_ERROR_INVALID_ARGUMENT", ...). */
const char* evosdpa_status_string(evosdpa_status_t status);

/* The library's version, "MAJOR.MINOR.PATCH"; may differ from the header's EVOSDPA_VERSION_* macros. */
const char* evosdpa_version(void);

/*
 * The accuracy contract every kernel is tested to (tests, benchmark verification and Python tests
 * all use these two functions; nothing else defines the rule).
 *
 * The output O may differ from float64 attention on the same (dtype-valued) inputs by at most
 *   evosdpa_output_tolerance(dtype, baseline_error, max_abs_reference)
 * where baseline_error is the largest error of the plain fused computation in that dtype (scores and
 * softmax in float32, the unnormalised probabilities P rounded to dtype, P.V accumulated in float32,
 * O rounded to dtype once) and max_abs_reference is max |O| of the float64 result. NaN or infinity in
 * O always fails. The log-sum-exp may differ from float64 by evosdpa_lse_tolerance_for(dtype, max |lse|)
 * (evosdpa_lse_tolerance(max |lse|) is the fp16/bf16 rule).
 *
 * FP8 inputs (dtype EVOSDPA_DTYPE_FLOAT8_E4M3): the float64 reference runs on the real inputs (stored
 * value times descale) and the baseline rounds where FP8 kernels round: P = 2^(S - m + 8) in float32
 * (at most 256), its row sum from that unrounded P, P rounded to E4M3 for P.V, O rounded once to
 * o_dtype. E4M3 keeps 3 mantissa bits, so the baseline error reaches 1-2.4% of max |O|; the bound is
 * then capped at 2^-4 max |O| and takes bf16's rounding for the output term.
 */
double evosdpa_output_tolerance(evosdpa_dtype_t dtype, double baseline_error, double max_abs_reference);
double evosdpa_lse_tolerance(double max_abs_lse);
/* Since 0.3: FP8 inputs' lse may differ by 2^-10 max(1, max |lse|), ten times the 16-bit bound: FP8
 * tensor cores accumulate Q.K with about 14 bits (Hopper's wgmma E4M3, measured: lse off by up to
 * 3.6e-4 max |lse| on inputs of sigma 6), which moves the lse while O, normalised, keeps its rule. */
double evosdpa_lse_tolerance_for(evosdpa_dtype_t dtype, double max_abs_lse);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* EVOSDPA_EVOSDPA_H */
