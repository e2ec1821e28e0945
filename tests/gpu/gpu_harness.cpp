#include "gpu/gpu_harness.hpp"

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <stdexcept>

using namespace evosdpa::host;

namespace gpu_test {

DeviceBuffer::DeviceBuffer(size_t n) : bytes(n) {
  if (n > 0 && cudaMalloc(&ptr, n) != cudaSuccess) throw std::runtime_error("cudaMalloc failed");
}
DeviceBuffer::~DeviceBuffer() {
  if (ptr) cudaFree(ptr);
}
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (ptr) cudaFree(ptr);
    ptr = other.ptr;
    bytes = other.bytes;
    other.ptr = nullptr;
    other.bytes = 0;
  }
  return *this;
}

void set_shape(evosdpa_params_t& p, const evosdpa::host::Shape& s, evosdpa_dtype_t dtype) {
  p.dtype = dtype;
  p.batch = s.batch;
  p.heads_q = s.heads_q;
  p.heads_kv = s.heads_kv;
  p.seqlen_q = s.seqlen_q;
  p.seqlen_k = s.seqlen_k;
  p.head_dim = s.head_dim;
  p.causal = s.causal;
  p.softmax_scale = static_cast<float>(s.scale);  // NaN asks for the default, as in the Shape
  p.sliding_window = s.sliding_window ? 1 : 0;
  p.window_left = s.sliding_window ? s.window_left : 0;
  p.window_right = s.sliding_window ? s.window_right : 0;
  p.softcap = static_cast<float>(s.softcap);
}

Strides mask_strides(const evosdpa::host::Shape& s) {
  const int64_t row = (s.seqlen_k + 15) / 16 * 16 + 16, head = (s.mask_rows ? s.seqlen_q : 1) * row + 32;
  const int64_t batch = (s.mask_heads ? s.heads_q : 1) * head;
  return {s.mask_batch ? batch : 0, s.mask_heads ? head : 0, s.mask_rows ? row : 0};
}

Strides strides_for(Layout l, int64_t heads, int64_t seqlen, int64_t head_dim) {
  switch (l) {
    case Layout::BHSD: return {heads * seqlen * head_dim, seqlen * head_dim, head_dim};
    case Layout::BSHD: return {seqlen * heads * head_dim, head_dim, heads * head_dim};
    case Layout::Padded: {
      // 16 spare elements per row: rows stay 16-byte aligned for 1-byte (FP8) elements too.
      const int64_t row = head_dim + 16, head = seqlen * row + 64;
      return {heads * head, head, row};
    }
  }
  return {0, 0, 0};
}

int64_t storage_elems(Layout l, int64_t batch, int64_t heads, int64_t seqlen, int64_t head_dim) {
  return batch * strides_for(l, heads, seqlen, head_dim).batch + 8;
}

evosdpa::Result run_poisoned(const evosdpa_params_t& p, const std::string& kernel, evosdpa_dtype_t dtype,
                             const DeviceBuffer& o_buf, const DeviceBuffer& lse_buf, std::vector<float>& o,
                             std::vector<float>& lse) {
  if (cudaMemset(o_buf.ptr, 0xff, o_buf.bytes) != cudaSuccess ||
      cudaMemset(lse_buf.ptr, 0xff, lse_buf.bytes) != cudaSuccess)
    return {EVOSDPA_ERROR_CUDA, "poison failed"};
  evosdpa::Result r = evosdpa::attention_forward(p, nullptr, kernel);
  if (!r.ok()) return r;
  if (cudaDeviceSynchronize() != cudaSuccess) return {EVOSDPA_ERROR_CUDA, "kernel failed"};
  std::vector<uint16_t> raw(o_buf.bytes / 2);
  lse.resize(lse_buf.bytes / 4);
  if (cudaMemcpy(raw.data(), o_buf.ptr, o_buf.bytes, cudaMemcpyDeviceToHost) != cudaSuccess ||
      cudaMemcpy(lse.data(), lse_buf.ptr, lse_buf.bytes, cudaMemcpyDeviceToHost) != cudaSuccess)
    return {EVOSDPA_ERROR_CUDA, "copy back failed"};
  o.resize(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) o[i] = evosdpa::host::decode(dtype, raw[i]);
  return r;
}

void upload(DeviceBuffer& buf, const std::vector<float>& x, Layout l, int64_t B, int64_t H, int64_t L, int64_t D,
            evosdpa_dtype_t dtype) {
  const Strides st = strides_for(l, H, L, D);
  // Untouched storage holds a recognisable finite value, so reads outside the tensor would show.
  std::vector<uint16_t> host(buf.bytes / 2, encode(dtype, 1000.f));
  scatter(x, B, H, L, D, dtype, st.batch, st.head, st.seq, host);
  if (cudaMemcpy(buf.ptr, host.data(), buf.bytes, cudaMemcpyHostToDevice) != cudaSuccess)
    throw std::runtime_error("upload failed");
}

namespace {

// FP8: the E4M3 codes (BHSD) at the layout's strides, untouched storage holding 448's code.
void upload_codes(DeviceBuffer& buf, const std::vector<uint8_t>& codes, Layout l, int64_t B, int64_t H, int64_t L,
                  int64_t D) {
  const Strides st = strides_for(l, H, L, D);
  std::vector<uint8_t> host(buf.bytes, encode_e4m3(kE4m3Max));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < L; ++i)
        for (int64_t d = 0; d < D; ++d)
          host[static_cast<size_t>(b * st.batch + h * st.head + i * st.seq + d)] =
              codes[static_cast<size_t>(((b * H + h) * L + i) * D + d)];
  if (cudaMemcpy(buf.ptr, host.data(), buf.bytes, cudaMemcpyHostToDevice) != cudaSuccess)
    throw std::runtime_error("upload failed");
}

void upload_floats(DeviceBuffer& buf, const std::vector<float>& x) {
  if (!x.empty() && cudaMemcpy(buf.ptr, x.data(), x.size() * 4, cudaMemcpyHostToDevice) != cudaSuccess)
    throw std::runtime_error("upload failed");
}

}  // namespace

DeviceProblem::DeviceProblem(const Shape& s, evosdpa_dtype_t dtype, Layout layout, const Inputs& in, bool with_lse,
                             evosdpa_dtype_t o_dtype)
    : shape_(s),
      dtype_(dtype),
      o_dtype_(dtype == EVOSDPA_DTYPE_FLOAT8_E4M3 ? o_dtype : dtype),
      layout_(layout),
      q_(evosdpa_dtype_size(dtype) * storage_elems(layout, s.batch, s.heads_q, s.seqlen_q, s.head_dim)),
      k_(evosdpa_dtype_size(dtype) * storage_elems(layout, s.batch, s.heads_kv, s.seqlen_k, s.head_dim)),
      v_(evosdpa_dtype_size(dtype) * storage_elems(layout, s.batch, s.heads_kv, s.seqlen_k, s.head_dim)),
      o_(2 * storage_elems(layout, s.batch, s.heads_q, s.seqlen_q, s.head_dim)),
      lse_(with_lse ? 4 * s.rows() + 4 : 0),
      q_descale_(4 * in.q_descale.size()),
      k_descale_(4 * in.k_descale.size()),
      v_descale_(4 * in.v_descale.size()) {
  evosdpa_params_init(&params_);
  if (dtype == EVOSDPA_DTYPE_FLOAT8_E4M3) {
    upload_codes(q_, in.q8, layout, s.batch, s.heads_q, s.seqlen_q, s.head_dim);
    upload_codes(k_, in.k8, layout, s.batch, s.heads_kv, s.seqlen_k, s.head_dim);
    upload_codes(v_, in.v8, layout, s.batch, s.heads_kv, s.seqlen_k, s.head_dim);
    upload_floats(q_descale_, in.q_descale);
    upload_floats(k_descale_, in.k_descale);
    upload_floats(v_descale_, in.v_descale);
    params_.o_dtype = o_dtype_;
    params_.q_descale = static_cast<const float*>(q_descale_.ptr);
    params_.k_descale = static_cast<const float*>(k_descale_.ptr);
    params_.v_descale = static_cast<const float*>(v_descale_.ptr);
    if (in.per_head_scales()) {  // [B, Hkv]
      params_.descale_batch_stride = s.heads_kv;
      params_.descale_head_stride = 1;
    }
  } else {
    upload(q_, in.q, layout, s.batch, s.heads_q, s.seqlen_q, s.head_dim, dtype);
    upload(k_, in.k, layout, s.batch, s.heads_kv, s.seqlen_k, s.head_dim, dtype);
    upload(v_, in.v, layout, s.batch, s.heads_kv, s.seqlen_k, s.head_dim, dtype);
  }
  params_.q = q_.ptr;
  params_.k = k_.ptr;
  params_.v = v_.ptr;
  params_.o = o_.ptr;
  params_.lse = with_lse ? static_cast<float*>(lse_.ptr) : nullptr;
  set_shape(params_, s, dtype);
  if (s.mask_type != EVOSDPA_MASK_NONE) {
    // Element (b, h, i, j) at the padded strides; the padding holds values no correct read uses.
    const Strides ms = mask_strides(s);
    const int64_t nb = s.mask_batch ? s.batch : 1, nh = s.mask_heads ? s.heads_q : 1, nr = s.mask_rows ? s.seqlen_q : 1;
    const int64_t elems = (nb - 1) * ms.batch + (nh - 1) * ms.head + (nr - 1) * ms.seq + s.seqlen_k + 64;
    const bool is_bool = s.mask_type == EVOSDPA_MASK_BOOL;
    std::vector<uint8_t> bytes(static_cast<size_t>(elems));
    std::vector<uint16_t> halves(static_cast<size_t>(elems), evosdpa::host::encode(dtype, 1000.f));
    for (int64_t b = 0; b < nb; ++b)
      for (int64_t h = 0; h < nh; ++h)
        for (int64_t i = 0; i < nr; ++i)
          for (int64_t j = 0; j < s.seqlen_k; ++j) {
            const size_t at = static_cast<size_t>(b * ms.batch + h * ms.head + i * ms.seq + j);
            const float x = in.mask[s.mask_index(b, h, i, j)];
            if (is_bool) bytes[at] = x != 0.f ? 1 : 0;
            else halves[at] = evosdpa::host::encode(dtype, x);
          }
    mask_ = DeviceBuffer(static_cast<size_t>(elems) * (is_bool ? 1 : 2));
    const void* src = is_bool ? static_cast<const void*>(bytes.data()) : static_cast<const void*>(halves.data());
    if (cudaMemcpy(mask_.ptr, src, mask_.bytes, cudaMemcpyHostToDevice) != cudaSuccess)
      throw std::runtime_error("mask upload failed");
    params_.mask = mask_.ptr;
    params_.mask_type = s.mask_type;
    params_.mask_batch_stride = ms.batch;
    params_.mask_head_stride = ms.head;
    params_.mask_seq_stride = ms.seq;
  }
  if (s.alibi) {
    // Per batch entry heads_q + 3 floats apart (a stride the kernels must honour), or one set (stride 0).
    const int64_t stride = s.alibi_batch ? s.heads_q + 3 : 0, sets = s.alibi_batch ? s.batch : 1;
    std::vector<float> slopes(static_cast<size_t>((sets - 1) * stride + s.heads_q), 1e4f);
    for (int64_t b = 0; b < sets; ++b)
      for (int64_t h = 0; h < s.heads_q; ++h)
        slopes[static_cast<size_t>(b * stride + h)] = static_cast<float>(in.alibi_slope(s, b, h));
    alibi_ = DeviceBuffer(slopes.size() * 4);
    if (cudaMemcpy(alibi_.ptr, slopes.data(), alibi_.bytes, cudaMemcpyHostToDevice) != cudaSuccess)
      throw std::runtime_error("ALiBi slopes upload failed");
    params_.alibi_slopes = static_cast<const float*>(alibi_.ptr);
    params_.alibi_batch_stride = stride;
  }
  const Strides sq = strides_for(layout, s.heads_q, s.seqlen_q, s.head_dim);
  const Strides sk = strides_for(layout, s.heads_kv, s.seqlen_k, s.head_dim);
  params_.q_batch_stride = params_.o_batch_stride = sq.batch;
  params_.q_head_stride = params_.o_head_stride = sq.head;
  params_.q_seq_stride = params_.o_seq_stride = sq.seq;
  params_.k_batch_stride = params_.v_batch_stride = sk.batch;
  params_.k_head_stride = params_.v_head_stride = sk.head;
  params_.k_seq_stride = params_.v_seq_stride = sk.seq;
  poison();
}

void DeviceProblem::poison() {
  if (o_.ptr) cudaMemset(o_.ptr, 0xff, o_.bytes);
  if (lse_.ptr) cudaMemset(lse_.ptr, 0xff, lse_.bytes);
  cudaDeviceSynchronize();
}

std::vector<uint16_t> DeviceProblem::raw_output() const {
  std::vector<uint16_t> host(o_.bytes / 2);
  if (!host.empty() && cudaMemcpy(host.data(), o_.ptr, o_.bytes, cudaMemcpyDeviceToHost) != cudaSuccess)
    throw std::runtime_error("download failed");
  return host;
}

std::vector<float> DeviceProblem::output() const {
  const Strides st = strides_for(layout_, shape_.heads_q, shape_.seqlen_q, shape_.head_dim);
  return gather(raw_output(), shape_.batch, shape_.heads_q, shape_.seqlen_q, shape_.head_dim, o_dtype_, st.batch,
                st.head, st.seq);
}

std::vector<float> DeviceProblem::lse() const {
  std::vector<float> host(static_cast<size_t>(shape_.rows()));
  if (!host.empty() && cudaMemcpy(host.data(), lse_.ptr, host.size() * 4, cudaMemcpyDeviceToHost) != cudaSuccess)
    throw std::runtime_error("download failed");
  return host;
}

uint64_t run_seed() {
  static const uint64_t seed = [] {
    const uint64_t s = evosdpa::host::base_seed();
    std::printf("EVOSDPA_TEST_SEED=%llu (set it to replay this run's inputs)\n", static_cast<unsigned long long>(s));
    return s;
  }();
  return seed;
}

const evosdpa::host::Expected& expected_for(const test_cases::KCase& c) {
  static std::map<std::string, std::unique_ptr<evosdpa::host::Expected>> cache;
  auto& slot = cache[test_cases::describe(c)];
  if (!slot)
    slot = std::make_unique<evosdpa::host::Expected>(evosdpa::host::make_expected(
        c.s, c.dtype, c.qk_sigma, c.row_step, evosdpa::host::case_seed(run_seed(), test_cases::describe(c)), c.fp8));
  return *slot;
}

}  // namespace gpu_test
