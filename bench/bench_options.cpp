#include "bench_options.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <sstream>

namespace evosdpa::bench {

const char* pass_label(Pass pass) {
  return pass == Pass::Bwd ? "bwd" : pass == Pass::FwdBwd ? "fwdbwd" : "fwd";
}

std::optional<Pass> pass_of_label(const std::string& label) {
  for (Pass p : {Pass::Fwd, Pass::Bwd, Pass::FwdBwd})
    if (label == pass_label(p)) return p;
  return std::nullopt;
}

double flop_factor(Pass pass) { return pass == Pass::Bwd ? 2.5 : pass == Pass::FwdBwd ? 3.5 : 1.0; }

const char* bwd_mode_label(evosdpa_backward_mode_t mode) {
  return mode == EVOSDPA_BACKWARD_FAST ? "fast" : "deterministic";
}

std::optional<evosdpa_backward_mode_t> bwd_mode_of_label(const std::string& label) {
  for (auto m : {EVOSDPA_BACKWARD_DETERMINISTIC, EVOSDPA_BACKWARD_FAST})
    if (label == bwd_mode_label(m)) return m;
  return std::nullopt;
}

double BenchShape::flops(Pass pass) const {
  double pairs = static_cast<double>(seqlen_q) * seqlen_k;
  if (causal != EVOSDPA_CAUSAL_NONE) {
    const int64_t offset = causal == EVOSDPA_CAUSAL_BOTTOM_RIGHT ? seqlen_k - seqlen_q : 0;
    pairs = 0;
    for (int64_t i = 0; i < seqlen_q; ++i) pairs += static_cast<double>(std::clamp<int64_t>(i + offset + 1, 0, seqlen_k));
  }
  return 4.0 * batch * heads * pairs * head_dim * flop_factor(pass);
}

double BenchShape::bytes(Pass pass) const {
  const double bh = static_cast<double>(batch) * heads;
  const double in = dtype == EVOSDPA_DTYPE_FLOAT8_E4M3 ? 1.0 : 2.0;
  const double forward = bh * head_dim * (in * (seqlen_q + 2.0 * seqlen_k) + 2.0 * seqlen_q);
  // Q, O, dO, dQ and K, V, dK, dV in 16 bits, the float32 lse.
  const double backward = bh * (2.0 * head_dim * 4.0 * (seqlen_q + seqlen_k) + 4.0 * seqlen_q);
  return pass == Pass::Fwd ? forward : pass == Pass::Bwd ? backward : forward + backward;
}

const char* dtype_label(evosdpa_dtype_t dtype) {
  return dtype == EVOSDPA_DTYPE_BFLOAT16 ? "bf16" : dtype == EVOSDPA_DTYPE_FLOAT8_E4M3 ? "fp8" : "fp16";
}

std::optional<evosdpa_dtype_t> dtype_of_label(const std::string& label) {
  if (label == "fp16") return EVOSDPA_DTYPE_FLOAT16;
  if (label == "bf16") return EVOSDPA_DTYPE_BFLOAT16;
  if (label == "fp8") return EVOSDPA_DTYPE_FLOAT8_E4M3;
  return std::nullopt;
}

std::string BenchShape::label() const {
  std::ostringstream s;
  s << "B" << batch << " H" << heads << " Lq" << seqlen_q;
  if (seqlen_k != seqlen_q) s << " Lk" << seqlen_k;
  s << " D" << head_dim << " " << dtype_label(dtype) << " "
    << (causal == EVOSDPA_CAUSAL_NONE ? "full" : causal == EVOSDPA_CAUSAL_TOP_LEFT ? "causal" : "causal-br");
  return s.str();
}

std::string usage() {
  return "usage: evosdpa-bench [options]\n"
         "  with no options: B=1 H=8 L=512 D=64 fp16, verified against the CPU reference, then timed\n"
         "  --batch N --heads N --seqlen N (sets Lq and Lk) --seqlen-q N --seqlen-k N --head-dim 64|128\n"
         "  --dtype fp16|bf16|both|fp8 (E4M3 inputs, per-tensor descales, bf16 output)\n"
         "  --causal none|top-left|bottom-right\n"
         "  --grid acceptance|fa3   named shape grid (replaces the shape flags)\n"
         "  --kernel NAME[,NAME..]  auto (default), wgmma_sm90, mma_sm80, reference, cudnn (cuDNN's SDPA through\n"
         "                          cudnn_frontend, as a peer), or all\n"
         "  --pass fwd|bwd|fwdbwd   what is timed (fwd): the forward; the backward alone, on O and lse made by a\n"
         "                          forward (evosdpa's auto, or cuDNN's own for cudnn); a forward then a backward.\n"
         "                          FLOPs as FlashAttention counts them: bwd 2.5x, fwdbwd 3.5x the forward's\n"
         "  --bwd-mode deterministic|fast  the backward's dQ summation (deterministic)\n"
         "  --warmup N (10) --iters N (100)  --graph (time CUDA-graph replays)  --cold-l2\n"
         "  --target-rse X (0.005) --max-iters N (2000) --max-seconds S (2): time more batches of --iters\n"
         "                          runs until the relative standard error of the mean is <= X;\n"
         "                          a shape's kernels are timed in alternating batches (same clocks)\n"
         "  --no-verify  --json FILE\n";
}

std::optional<std::vector<BenchShape>> named_grid(const std::string& name, evosdpa_dtype_t dtype) {
  std::vector<BenchShape> out;
  auto add = [&](int64_t b, int64_t h, int64_t l, int64_t d, evosdpa_causal_t c) {
    BenchShape s;
    s.batch = b, s.heads = h, s.seqlen_q = s.seqlen_k = l, s.head_dim = d, s.causal = c, s.dtype = dtype;
    out.push_back(s);
  };
  if (name == "acceptance") {
    add(1, 8, 512, 64, EVOSDPA_CAUSAL_NONE);
    add(1, 8, 512, 64, EVOSDPA_CAUSAL_TOP_LEFT);
    add(2, 8, 2048, 64, EVOSDPA_CAUSAL_NONE);
    add(2, 8, 2048, 64, EVOSDPA_CAUSAL_TOP_LEFT);
    add(2, 8, 2048, 128, EVOSDPA_CAUSAL_NONE);
  } else if (name == "fa3") {
    for (auto c : {EVOSDPA_CAUSAL_NONE, EVOSDPA_CAUSAL_TOP_LEFT})
      for (int64_t d : {64, 128})
        for (int64_t l = 512; l <= 16384; l *= 2) add(16384 / l, 2048 / d, l, d, c);
  } else {
    return std::nullopt;
  }
  return out;
}

namespace {

bool to_int(const std::string& s, int64_t& out) {
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0') return false;
  out = v;
  return true;
}

}  // namespace

std::optional<Options> parse_options(const std::vector<std::string>& args, std::string& error, bool& help) {
  Options o;
  BenchShape shape;
  std::vector<evosdpa_dtype_t> dtypes{EVOSDPA_DTYPE_FLOAT16};
  bool bwd_mode_given = false;
  help = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](std::string& v) {
      if (i + 1 >= args.size()) {
        error = a + " needs a value";
        return false;
      }
      v = args[++i];
      return true;
    };
    auto integer = [&](int64_t& dst, int64_t lo) {
      std::string v;
      if (!value(v)) return false;
      int64_t n;
      if (!to_int(v, n) || n < lo) {
        error = a + ": '" + v + "' is not an integer >= " + std::to_string(lo);
        return false;
      }
      dst = n;
      return true;
    };
    std::string v;
    int64_t n = 0;
    if (a == "-h" || a == "--help") {
      help = true;
      error = usage();
      return std::nullopt;
    } else if (a == "--batch") {
      if (!integer(shape.batch, 1)) return std::nullopt;
    } else if (a == "--heads") {
      if (!integer(shape.heads, 1)) return std::nullopt;
    } else if (a == "--seqlen") {
      if (!integer(shape.seqlen_q, 1)) return std::nullopt;
      shape.seqlen_k = shape.seqlen_q;
    } else if (a == "--seqlen-q") {
      if (!integer(shape.seqlen_q, 1)) return std::nullopt;
    } else if (a == "--seqlen-k") {
      if (!integer(shape.seqlen_k, 0)) return std::nullopt;
    } else if (a == "--head-dim") {
      if (!integer(shape.head_dim, 1)) return std::nullopt;
    } else if (a == "--warmup") {
      if (!integer(n, 0)) return std::nullopt;
      o.warmup = static_cast<int>(n);
    } else if (a == "--iters") {
      if (!integer(n, 1)) return std::nullopt;
      o.iters = static_cast<int>(n);
    } else if (a == "--max-iters") {
      if (!integer(n, 1)) return std::nullopt;
      o.max_iters = static_cast<int>(n);
    } else if (a == "--target-rse" || a == "--max-seconds") {
      if (!value(v)) return std::nullopt;
      char* end = nullptr;
      const double x = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || !(x >= 0)) {
        error = a + ": '" + v + "' is not a non-negative number";
        return std::nullopt;
      }
      (a == "--target-rse" ? o.target_rse : o.max_seconds) = x;
    } else if (a == "--dtype") {
      if (!value(v)) return std::nullopt;
      if (const auto d = dtype_of_label(v)) dtypes = {*d};
      else if (v == "both") dtypes = {EVOSDPA_DTYPE_FLOAT16, EVOSDPA_DTYPE_BFLOAT16};
      else {
        error = "--dtype: '" + v + "' is not fp16, bf16, both or fp8";
        return std::nullopt;
      }
    } else if (a == "--causal") {
      if (!value(v)) return std::nullopt;
      if (v == "none") shape.causal = EVOSDPA_CAUSAL_NONE;
      else if (v == "top-left") shape.causal = EVOSDPA_CAUSAL_TOP_LEFT;
      else if (v == "bottom-right") shape.causal = EVOSDPA_CAUSAL_BOTTOM_RIGHT;
      else {
        error = "--causal: '" + v + "' is not none, top-left or bottom-right";
        return std::nullopt;
      }
    } else if (a == "--pass") {
      if (!value(v)) return std::nullopt;
      const auto p = pass_of_label(v);
      if (!p) {
        error = "--pass: '" + v + "' is not fwd, bwd or fwdbwd";
        return std::nullopt;
      }
      o.pass = *p;
    } else if (a == "--bwd-mode") {
      if (!value(v)) return std::nullopt;
      const auto m = bwd_mode_of_label(v);
      if (!m) {
        error = "--bwd-mode: '" + v + "' is not deterministic or fast";
        return std::nullopt;
      }
      o.bwd_mode = *m;
      bwd_mode_given = true;
    } else if (a == "--grid") {
      if (!value(o.grid)) return std::nullopt;
      if (!named_grid(o.grid, EVOSDPA_DTYPE_FLOAT16)) {
        error = "--grid: '" + o.grid + "' is not acceptance or fa3";
        return std::nullopt;
      }
    } else if (a == "--kernel") {
      if (!value(v)) return std::nullopt;
      o.kernels.clear();
      std::stringstream ss(v);
      for (std::string k; std::getline(ss, k, ',');)
        if (!k.empty()) o.kernels.push_back(k);
      if (o.kernels.empty()) {
        error = "--kernel: no kernel named";
        return std::nullopt;
      }
    } else if (a == "--graph") {
      o.graph = true;
    } else if (a == "--cold-l2") {
      o.cold_l2 = true;
    } else if (a == "--no-verify") {
      o.verify = false;
    } else if (a == "--json") {
      if (!value(o.json_path)) return std::nullopt;
    } else {
      error = "unknown option '" + a + "'\n" + usage();
      return std::nullopt;
    }
  }
  if (bwd_mode_given && o.pass == Pass::Fwd) {  // it would be ignored: say so rather than time the wrong thing
    error = "--bwd-mode needs --pass bwd or fwdbwd";
    return std::nullopt;
  }
  if (o.pass != Pass::Fwd && std::find(dtypes.begin(), dtypes.end(), EVOSDPA_DTYPE_FLOAT8_E4M3) != dtypes.end()) {
    error = std::string("--pass ") + pass_label(o.pass) + ": FP8 inputs have no backward pass (fp16 and bf16 only)";
    return std::nullopt;
  }
  for (auto dt : dtypes) {
    if (!o.grid.empty()) {
      const auto grid = named_grid(o.grid, dt);  // a named local: ranging over *named_grid(..) would dangle
      o.shapes.insert(o.shapes.end(), grid->begin(), grid->end());
    } else {
      BenchShape s = shape;
      s.dtype = dt;
      o.shapes.push_back(s);
    }
  }
  return o;
}

Stats summarize(std::vector<double> x) {
  Stats s;
  s.count = static_cast<int>(x.size());
  if (x.empty()) return s;
  std::sort(x.begin(), x.end());
  auto quantile = [&](double q) {
    const double pos = q * (x.size() - 1);
    const size_t lo = static_cast<size_t>(std::floor(pos));
    const size_t hi = std::min(lo + 1, x.size() - 1);
    return x[lo] + (pos - lo) * (x[hi] - x[lo]);
  };
  s.median = quantile(0.5);
  s.p90 = quantile(0.9);
  s.min = x.front();
  s.max = x.back();
  s.mean = std::accumulate(x.begin(), x.end(), 0.0) / x.size();
  double var = 0;
  for (double v : x) var += (v - s.mean) * (v - s.mean);
  s.stddev = x.size() > 1 ? std::sqrt(var / (x.size() - 1)) : 0.0;
  return s;
}

}  // namespace evosdpa::bench
