// The public API on a real device: pointer checks, supports() agreeing with dispatch, streams, CUDA
// graph capture, and the automatic fallback for inputs the tensor-core kernel cannot take.
#include <gtest/gtest.h>

#include <cstring>

#include "common/cases.hpp"
#include "gpu/gpu_harness.hpp"
#include "host/accuracy_check.hpp"

using namespace evosdpa::host;
using namespace gpu_test;

namespace {

Shape small_shape(int64_t d = 64) {
  Shape s;
  s.batch = 2, s.heads_q = s.heads_kv = 4, s.seqlen_q = 300, s.seqlen_k = 200, s.head_dim = d;
  s.causal = EVOSDPA_CAUSAL_BOTTOM_RIGHT;
  return s;
}

TEST(DeviceApi, HostPointerIsRefused) {
  const Shape s = small_shape();
  DeviceProblem prob(s, EVOSDPA_DTYPE_FLOAT16, Layout::BHSD, random_inputs(s, EVOSDPA_DTYPE_FLOAT16, 1.0, 1), false);
  auto p = prob.params();
  std::vector<uint16_t> host(static_cast<size_t>(s.kv_elems()));
  p.k = host.data();
  const auto r = evosdpa::attention_forward(p);
  EXPECT_EQ(r.status, EVOSDPA_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(r.message.find("k is host memory"), std::string::npos) << r.message;
}

// The mask tensor and the ALiBi slopes are read by the kernels like q: host memory, malloc'd or pinned, is
// refused naming the field, by supports() too, instead of reaching a kernel (where pageable memory is an
// illegal address, which loses the context, and TMA cannot read pinned memory).
TEST(DeviceApi, HostMaskAndAlibiSlopesAreRefused) {
  const Shape s = test_cases::with_alibi(test_cases::with_mask(small_shape(), EVOSDPA_MASK_ADDITIVE), true);
  DeviceProblem prob(s, EVOSDPA_DTYPE_BFLOAT16, Layout::BHSD, random_inputs(s, EVOSDPA_DTYPE_BFLOAT16, 1.0, 7), true);
  const auto p = prob.params();
  constexpr size_t kBytes = 1 << 16;  // never read: the checks only ask what memory the pointer is
  std::vector<uint8_t> paged(kBytes + 16);
  void* pinned = nullptr;
  CUDA_OK(cudaMallocHost(&pinned, kBytes));
  // 16-byte aligned, as every kernel's alignment rule wants, so that only the memory's kind is wrong.
  void* malloced = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(paged.data()) + 15) & ~uintptr_t{15});
  for (void* host : {malloced, pinned}) {
    for (const char* kernel : {"auto", "reference"}) {
      auto q = p;
      q.mask = host;
      auto r = evosdpa::supports(q, kernel);
      // ASSERT: without the check the forward below would launch on host memory.
      ASSERT_EQ(r.status, EVOSDPA_ERROR_INVALID_ARGUMENT) << kernel << ": " << r.message;
      EXPECT_NE(r.message.find("mask is host memory"), std::string::npos) << r.message;
      EXPECT_EQ(evosdpa::attention_forward(q, nullptr, kernel).status, EVOSDPA_ERROR_INVALID_ARGUMENT) << kernel;
      q = p;
      q.alibi_slopes = static_cast<const float*>(host);
      r = evosdpa::supports(q, kernel);
      ASSERT_EQ(r.status, EVOSDPA_ERROR_INVALID_ARGUMENT) << kernel << ": " << r.message;
      EXPECT_NE(r.message.find("alibi_slopes is host memory"), std::string::npos) << r.message;
      EXPECT_EQ(evosdpa::attention_forward(q, nullptr, kernel).status, EVOSDPA_ERROR_INVALID_ARGUMENT) << kernel;
    }
  }
  CUDA_OK(cudaFreeHost(pinned));
  ASSERT_TRUE(evosdpa::attention_forward(p).ok());  // the device copies are taken
  CUDA_OK(cudaDeviceSynchronize());
}

TEST(DeviceApi, PointerOnAnotherDeviceIsRefused) {
  int n = 0;
  cudaGetDeviceCount(&n);
  if (n < 2) GTEST_SKIP() << "needs two GPUs";
  const Shape s = small_shape();
  DeviceProblem prob(s, EVOSDPA_DTYPE_FLOAT16, Layout::BHSD, random_inputs(s, EVOSDPA_DTYPE_FLOAT16, 1.0, 1), false);
  const auto p = prob.params();
  CUDA_OK(cudaSetDevice(1));
  const auto r = evosdpa::attention_forward(p);
  CUDA_OK(cudaSetDevice(0));
  EXPECT_EQ(r.status, EVOSDPA_ERROR_DEVICE) << r.message;
}

TEST(DeviceApi, SupportsNamesTheKernelThatRuns) {
  const Shape s = small_shape();
  DeviceProblem prob(s, EVOSDPA_DTYPE_FLOAT16, Layout::BHSD, random_inputs(s, EVOSDPA_DTYPE_FLOAT16, 1.0, 2), true);
  auto p = prob.params();
  auto r = evosdpa::supports(p);
  ASSERT_TRUE(r.ok()) << r.message;
  int device = 0, major = 0;
  CUDA_OK(cudaGetDevice(&device));
  CUDA_OK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  EXPECT_EQ(r.kernel, major == 9 ? "wgmma_sm90" : "mma_sm80");
  // A row stride of 68 elements is element-aligned but not 16-byte aligned for every row.
  p.q_seq_stride = 68;
  p.seqlen_q = 100;
  r = evosdpa::supports(p);
  ASSERT_TRUE(r.ok()) << r.message;
  EXPECT_EQ(r.kernel, "reference");
  r = evosdpa::supports(p, "mma_sm80");
  EXPECT_EQ(r.status, EVOSDPA_ERROR_NOT_SUPPORTED);
  EXPECT_NE(r.message.find("q seq stride 68"), std::string::npos) << r.message;
  EXPECT_EQ(evosdpa::attention_forward(p, nullptr, "mma_sm80").status, EVOSDPA_ERROR_NOT_SUPPORTED);
}

TEST(DeviceApi, MisalignedInputsFallBackToTheReferenceKernelCorrectly) {
  Shape s = small_shape();
  const Expected e = make_expected(s, EVOSDPA_DTYPE_BFLOAT16, 1.0, 1, case_seed(base_seed(), "misaligned"));
  const Inputs& in = e.in;
  // Q stored at an offset of one element: 2-byte aligned, not 16.
  std::vector<uint16_t> q_host(static_cast<size_t>(s.q_elems() + 1));
  scatter(in.q, s.batch, s.heads_q, s.seqlen_q, s.head_dim, EVOSDPA_DTYPE_BFLOAT16, s.heads_q * s.seqlen_q * 64,
          s.seqlen_q * 64, 64, q_host);
  std::memmove(q_host.data() + 1, q_host.data(), static_cast<size_t>(s.q_elems()) * 2);
  DeviceProblem prob(s, EVOSDPA_DTYPE_BFLOAT16, Layout::BHSD, in, true);
  DeviceBuffer q_shifted(q_host.size() * 2);
  CUDA_OK(cudaMemcpy(q_shifted.ptr, q_host.data(), q_host.size() * 2, cudaMemcpyHostToDevice));
  auto p = prob.params();
  p.q = static_cast<const uint16_t*>(q_shifted.ptr) + 1;
  const auto r = evosdpa::attention_forward(p);
  ASSERT_TRUE(r.ok()) << r.message;
  CUDA_OK(cudaDeviceSynchronize());
  const std::vector<float> lse = prob.lse();
  const Verdict v = check_attention(s, EVOSDPA_DTYPE_BFLOAT16, e, prob.output(), &lse);
  EXPECT_TRUE(v.pass) << v.message << " (seed " << e.seed << ")";
}

// A dimension of size 1 is never stepped over, so its stride may be anything: supports() checks only the
// longer dimensions' strides, and the launch must accept what it accepted (wgmma_sm90's TMA maps want
// strides that are multiples of 16 bytes). q and o [2, 1, 1, D] with head and seq strides of 1 (PyTorch's
// for a [2, 1, 1, D] view of [2, D], which it calls contiguous) and K/V's single head at a stride of 3,
// with a softcap (wgmma_sm90 on Hopper); a mask [1, 1, 1, 100] with mask_seq_stride 100 at seqlen_q 1.
TEST(DeviceApi, SizeOneDimensionsTakeAnyStride) {
  for (const bool mask : {false, true}) {
    Shape s;
    s.batch = 2, s.heads_q = s.heads_kv = 1, s.seqlen_q = 1, s.seqlen_k = mask ? 100 : 300, s.head_dim = 64;
    s = mask ? test_cases::with_mask(s, EVOSDPA_MASK_ADDITIVE, false, false, true)
             : test_cases::with_mods(s, -1, -1, 30.0);
    const Expected e = make_expected(s, EVOSDPA_DTYPE_BFLOAT16, 3.0, 1, case_seed(base_seed(), "size_one_dims"));
    DeviceProblem prob(s, EVOSDPA_DTYPE_BFLOAT16, Layout::BHSD, e.in, true);
    auto p = prob.params();
    if (mask) {
      p.mask_seq_stride = 100;  // 200 bytes: not a multiple of 16, and never stepped over
    } else {
      p.q_head_stride = p.q_seq_stride = p.o_head_stride = p.o_seq_stride = 1;
      p.k_head_stride = p.v_head_stride = 3;
    }
    for (const char* kernel : {"auto", "wgmma_sm90", "mma_sm80", "reference"}) {
      const auto r = evosdpa::supports(p, kernel);
      if (!r.ok()) {
        EXPECT_NE(std::string(kernel), "auto") << r.message;
        continue;
      }
      prob.poison();
      const auto run = evosdpa::attention_forward(p, nullptr, kernel);
      ASSERT_TRUE(run.ok()) << kernel << " (" << r.kernel << "), mask " << mask << ": " << run.message;
      CUDA_OK(cudaDeviceSynchronize());
      const std::vector<float> lse = prob.lse();
      const Verdict v = check_attention(s, EVOSDPA_DTYPE_BFLOAT16, e, prob.output(), &lse);
      EXPECT_TRUE(v.pass) << kernel << ", mask " << mask << ": " << v.message << " (seed " << e.seed << ")";
    }
  }
}

TEST(DeviceApi, OutputOverlappingAnInputIsRefusedBeforeAnyLaunch) {
  const Shape s = small_shape();
  DeviceProblem prob(s, EVOSDPA_DTYPE_FLOAT16, Layout::BHSD, random_inputs(s, EVOSDPA_DTYPE_FLOAT16, 1.0, 5), true);
  auto p = prob.params();
  p.o = const_cast<void*>(p.v);  // writing O into V while other blocks read V would race
  const auto r = evosdpa::attention_forward(p);
  EXPECT_EQ(r.status, EVOSDPA_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(r.message.find("overlaps input v"), std::string::npos) << r.message;
  p = prob.params();
  p.lse = reinterpret_cast<float*>(const_cast<void*>(p.q));
  EXPECT_EQ(evosdpa::supports(p).status, EVOSDPA_ERROR_INVALID_ARGUMENT);
}

// FP8 descales are device pointers like the tensors: host memory is refused naming the descale, and a
// graph captured with them reads the scales at replay (new values, no recapture).
TEST(DeviceApi, Fp8DescalesAreDeviceMemoryReadAtRunTime) {
  const Shape s = small_shape();
  const Inputs in = random_inputs(s, EVOSDPA_DTYPE_FLOAT8_E4M3, 1.0, 6);
  // bf16 output: doubling stays exact down to tiny values (fp16's subnormals would round 2x differently).
  DeviceProblem prob(s, EVOSDPA_DTYPE_FLOAT8_E4M3, Layout::BHSD, in, true, EVOSDPA_DTYPE_BFLOAT16);
  auto p = prob.params();
  const float host_scale = 1.f;
  p.k_descale = &host_scale;
  const auto r = evosdpa::attention_forward(p);
  EXPECT_EQ(r.status, EVOSDPA_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(r.message.find("k_descale is host memory"), std::string::npos) << r.message;

  p = prob.params();
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  ASSERT_TRUE(evosdpa::attention_forward(p, stream).ok());
  CUDA_OK(cudaStreamEndCapture(stream, &graph));
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  CUDA_OK(cudaGraphLaunch(exec, stream));
  CUDA_OK(cudaStreamSynchronize(stream));
  const std::vector<float> first = prob.output();
  // V's descale doubled on the device: the replayed graph's O doubles (exactly: a power of two).
  const float doubled = 2.f * in.v_descale[0];
  CUDA_OK(cudaMemcpy(const_cast<float*>(p.v_descale), &doubled, 4, cudaMemcpyHostToDevice));
  prob.poison();
  CUDA_OK(cudaGraphLaunch(exec, stream));
  CUDA_OK(cudaStreamSynchronize(stream));
  const std::vector<float> second = prob.output();
  ASSERT_EQ(first.size(), second.size());
  for (size_t i = 0; i < first.size(); ++i) ASSERT_EQ(second[i], 2.f * first[i]) << i;
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

TEST(DeviceApi, RunsOnAStreamAndInsideACudaGraph) {
  const Shape s = small_shape(128);
  DeviceProblem prob(s, EVOSDPA_DTYPE_FLOAT16, Layout::BSHD, random_inputs(s, EVOSDPA_DTYPE_FLOAT16, 1.0, 3), true);
  const auto p = prob.params();
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  ASSERT_TRUE(evosdpa::attention_forward(p, stream).ok());
  CUDA_OK(cudaStreamSynchronize(stream));
  const auto direct = prob.raw_output();
  const auto direct_lse = prob.lse();

  prob.poison();
  cudaGraph_t graph;
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  const auto r = evosdpa::attention_forward(p, stream);
  CUDA_OK(cudaStreamEndCapture(stream, &graph));
  ASSERT_TRUE(r.ok()) << r.message;
  cudaGraphExec_t exec;
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  for (int i = 0; i < 3; ++i) {
    prob.poison();
    CUDA_OK(cudaGraphLaunch(exec, stream));
    CUDA_OK(cudaStreamSynchronize(stream));
    EXPECT_EQ(prob.raw_output(), direct) << "graph replay " << i;
    EXPECT_EQ(std::memcmp(prob.lse().data(), direct_lse.data(), direct_lse.size() * 4), 0);
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

TEST(DeviceApi, EmptyKeysGiveZerosAndMinusInfinity) {
  Shape s = small_shape();
  s.seqlen_k = 0;
  DeviceProblem prob(s, EVOSDPA_DTYPE_FLOAT16, Layout::BHSD, random_inputs(s, EVOSDPA_DTYPE_FLOAT16, 1.0, 4), true);
  auto p = prob.params();
  p.k = p.v = nullptr;  // empty tensors may be null, as PyTorch gives them
  for (const char* kernel : {"mma_sm80", "wgmma_sm90", "reference"}) {
    prob.poison();
    const auto r = evosdpa::attention_forward(p, nullptr, kernel);
    ASSERT_TRUE(r.ok()) << r.message;
    CUDA_OK(cudaDeviceSynchronize());
    for (float x : prob.output()) ASSERT_EQ(x, 0.f) << kernel;
    for (float x : prob.lse()) ASSERT_TRUE(std::isinf(x) && x < 0) << kernel;
  }
}

}  // namespace
