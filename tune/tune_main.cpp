// evosdpa-tune (issue 10): the elite search over a kernel family's levers on this GPU, resumable between
// calls: mma_sm80 (bucket: head dim, default or --small-grid variant) or wgmma_sm90 (bucket: head dim,
// --consumers, --split-keys; consumers default to the first hand-made row's of the head dim and split).
//   evosdpa-tune [--family mma_sm80|wgmma_sm90] --head-dim 64|128 [--small-grid] [--split-keys]
//                [--consumers N] [--grid fa3|acceptance] [--state FILE] [--seed N] [--generations N]
//                [--seconds S] [--report FILE.md]
// (--generations 0 with an existing --state rewrites the report from it without a GPU)
//   evosdpa-tune --emit-table DIR STATE.json...
// writes DIR/sm<cc>_<SMs>.inc, the tuned table of the model the searches ran on (each search's best elite
// where it beat the hand-made row by the search's gain, else that row), and lists it in DIR/index.inc:
// DIR is src/kernels/mma/tuned (or src/kernels/wgmma/tuned, for states of wgmma_sm90 searches) for the
// build to compile it in.
// With --state, an existing file is resumed (same family) and the state is saved after every generation,
// so a run cut off by a time limit loses at most one generation.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "bench_options.hpp"
#include "evaluate_mma.hpp"
#include "evaluate_wgmma.hpp"
#include "search_json.hpp"
#include "spaces.hpp"
#include "tuned_table.hpp"

using namespace evosdpa::tune;

namespace {

int usage(const char* why) {
  std::fprintf(stderr,
               "%s%susage: evosdpa-tune [--family mma_sm80|wgmma_sm90] --head-dim 64|128 [--small-grid]\n"
               "                     [--split-keys] [--consumers N] [--grid fa3|acceptance] [--state FILE]\n"
               "                     [--seed N] [--generations N] [--seconds S] [--report FILE.md]\n"
               "       evosdpa-tune --emit-table DIR STATE.json...\n",
               why, *why ? "\n" : "");
  return 2;
}

// The best elite's speedup per generation as an SVG line chart (self-contained, no plotting library).
std::string fitness_svg(const std::vector<double>& best) {
  const double w = 480, h = 240, left = 56, right = 12, top = 12, bottom = 36;
  double lo = 1.0, hi = 1.0;
  for (double b : best) lo = std::min(lo, b), hi = std::max(hi, b);
  const double pad = std::max(0.01, 0.05 * (hi - lo));
  lo -= pad, hi += pad;
  const double span = best.size() > 1 ? static_cast<double>(best.size() - 1) : 1.0;
  const auto x = [&](size_t g) { return left + (w - left - right) * static_cast<double>(g) / span; };
  const auto y = [&](double v) { return top + (h - top - bottom) * (hi - v) / (hi - lo); };
  char buf[160];
  std::string out = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"480\" height=\"240\" font-family=\"sans-serif\" "
                    "font-size=\"11\">\n<rect width=\"480\" height=\"240\" fill=\"white\"/>\n";
  std::snprintf(buf, sizeof buf, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#bbb\" stroke-dasharray=\"4\"/>\n",
                left, y(1.0), w - right, y(1.0));
  out += buf;  // the table's row
  out += "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"2\" points=\"";
  for (size_t g = 0; g < best.size(); ++g) {
    std::snprintf(buf, sizeof buf, "%.1f,%.1f ", x(g), y(best[g]));
    out += buf;
  }
  out += "\"/>\n";
  std::snprintf(buf, sizeof buf,
                "<text x=\"4\" y=\"%.1f\">%.3fx</text>\n<text x=\"4\" y=\"%.1f\">%.3fx</text>\n"
                "<text x=\"%.1f\" y=\"%.1f\">generation 0 .. %zu</text>\n",
                y(hi) + 10, hi, y(lo), lo, left, h - 10, best.size() - 1);
  out += buf;
  return out + "</svg>\n";
}

// The report; `plot`: the file name of the fitness chart beside it ("" for none).
std::string report(const State& st, const GenomeSpace& space, const std::string& plot) {
  std::string out = "# evosdpa-tune: " + space.family + "\n\n";
  out += "Generation " + std::to_string(st.generation) + (st.done ? ", stopped: " + st.stop_reason : ", running") + ".\n\n";
  if (!plot.empty()) out += "Best speedup against the table's row, per generation (dashed: 1.0):\n\n![best fitness](" + plot + ")\n\n";
  out += "| elite | speedup vs the table's row | rel. std. error |\n|---|---:|---:|\n";
  char buf[64];
  for (const Elite& e : st.elites) {
    std::snprintf(buf, sizeof buf, " | %.3f | %.2g |\n", e.speedup, e.rel_stderr);
    out += "| " + space.describe(e.genome) + buf;
  }
  out += "\n| generation | candidate | verdict |\n|---:|---|---|\n";
  for (const Record& r : st.log)
    out += "| " + std::to_string(r.generation) + " | " + space.describe(r.genome) + " | " +
           r.verdict.substr(0, r.verdict.find('\n')) + " |\n";  // one line per row of the table
  return out;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// --emit-table: one table per model from the states' chosen rows (a bucket searched twice keeps the last).
int emit_table(const std::string& dir, const std::vector<std::string>& states) {
  std::vector<std::pair<TunedDevice, std::vector<TunedEntry>>> models;
  int wgmma = -1;  // the states' family: 1 wgmma_sm90, 0 mma_sm80 (one family per table)
  for (const std::string& path : states) {
    std::ifstream in(path);
    if (!in) return usage(("cannot read " + path).c_str());
    const State st = state_from_json(nlohmann::json::parse(in));
    TunedEntry e;
    const bool is_mma = parse_mma_family(st.family, e.head_dim, e.small_grid);
    const bool is_wgmma = !is_mma && parse_wgmma_family(st.family, e.head_dim, e.split_keys, e.consumers);
    if (!is_mma && !is_wgmma) return usage((path + ": not a search of a known family").c_str());
    if (wgmma >= 0 && wgmma != (is_wgmma ? 1 : 0)) return usage("the states are of two families (one table each)");
    wgmma = is_wgmma ? 1 : 0;
    if (st.device.cc == 0 || st.device.sm_count == 0) return usage((path + ": no device recorded").c_str());
    const Genome row = is_wgmma ? wgmma_sm90_table(e.head_dim, e.split_keys, e.consumers).front()
                                : mma_sm80_table(e.head_dim, e.small_grid).front();
    e.source = path.substr(path.rfind('/') == std::string::npos ? 0 : path.rfind('/') + 1);
    e.genome = table_choice(st, row);
    e.hand_row = e.genome == row;
    e.best = 0.0;
    for (const Elite& el : st.elites) e.best = std::max(e.best, el.speedup);
    auto m = std::find_if(models.begin(), models.end(), [&](const auto& x) {
      return x.first.cc == st.device.cc && x.first.sm_count == st.device.sm_count;
    });
    if (m == models.end()) m = models.insert(models.end(), {st.device, {}});
    auto same = std::find_if(m->second.begin(), m->second.end(), [&](const TunedEntry& x) {
      return x.head_dim == e.head_dim && x.small_grid == e.small_grid && x.split_keys == e.split_keys &&
             x.consumers == e.consumers;
    });
    if (same != m->second.end()) *same = e;
    else m->second.push_back(e);
  }
  for (const auto& [device, entries] : models) {
    const std::string name = tuned_file_name(device);
    std::ofstream(dir + "/" + name) << (wgmma == 1 ? wgmma_tuned_file_text(device, entries)
                                                   : tuned_file_text(device, entries));
    const std::string index = with_index_line(read_file(dir + "/index.inc"), name);
    std::ofstream(dir + "/index.inc") << index;
    std::printf("%s/%s: %zu rows for %s\n", dir.c_str(), name.c_str(), entries.size(), device.name.c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 3 && std::string(argv[1]) == "--emit-table")
    return emit_table(argv[2], std::vector<std::string>(argv + 3, argv + argc));
  int head_dim = 0, generations = 1000, consumers = 0;
  bool small_grid = false, split_keys = false;
  std::string family = "mma_sm80";
  double seconds = 1e9;
  std::string grid = "fa3", state_path, report_path;
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    if (a == "--small-grid") small_grid = true;
    else if (a == "--split-keys") split_keys = true;
    else if (a == "--family" && (v = next())) family = v;
    else if (a == "--consumers" && (v = next())) consumers = std::atoi(v);
    else if (a == "--head-dim" && (v = next())) head_dim = std::atoi(v);
    else if (a == "--grid" && (v = next())) grid = v;
    else if (a == "--state" && (v = next())) state_path = v;
    else if (a == "--report" && (v = next())) report_path = v;
    else if (a == "--seed" && (v = next())) options.seed = std::strtoull(v, nullptr, 0);
    else if (a == "--generations" && (v = next())) generations = std::atoi(v);
    else if (a == "--seconds" && (v = next())) seconds = std::atof(v);
    else return usage(("unknown or incomplete option " + a).c_str());
  }
  if (head_dim != 64 && head_dim != 128) return usage("--head-dim must be 64 or 128");
  const bool wgmma = family == "wgmma_sm90";
  if (!wgmma && family != "mma_sm80") return usage(("unknown family " + family).c_str());
  if (wgmma && small_grid) return usage("--small-grid is mma_sm80's (wgmma_sm90: --split-keys)");
  if (!wgmma && (split_keys || consumers != 0)) return usage("--split-keys and --consumers are wgmma_sm90's");
  if (wgmma && consumers == 0)  // the first hand-made row's of the head dim and split
    for (const auto& c : evosdpa::detail::wgmma_sm90::kHandRows)
      if (consumers == 0 && !c.fp8 && c.head_dim == head_dim && c.split_keys == split_keys) consumers = c.consumers;
  if (wgmma && wgmma_sm90_hand_row(head_dim, split_keys, consumers) < 0)
    return usage("wgmma_sm90 has no row of this head dim, consumer count and split");
  const auto shapes = evosdpa::bench::named_grid(grid, EVOSDPA_DTYPE_FLOAT16);
  if (!shapes) return usage(("unknown grid " + grid).c_str());
  std::vector<evosdpa::host::Shape> grid_shapes;
  for (const auto& b : *shapes) {
    evosdpa::host::Shape s;
    s.batch = b.batch, s.heads_q = s.heads_kv = b.heads, s.seqlen_q = b.seqlen_q, s.seqlen_k = b.seqlen_k;
    s.head_dim = b.head_dim, s.causal = b.causal;
    grid_shapes.push_back(s);
  }
  const GenomeSpace space =
      wgmma ? wgmma_sm90_space(head_dim, split_keys, consumers) : mma_sm80_space(head_dim, small_grid);
  const std::vector<Genome> table =
      wgmma ? wgmma_sm90_table(head_dim, split_keys, consumers) : mma_sm80_table(head_dim, small_grid);
  std::ifstream saved;
  if (!state_path.empty()) saved.open(state_path);
  State st;
  if (saved) {
    st = state_from_json(nlohmann::json::parse(saved));
    if (st.family != space.family) {
      std::fprintf(stderr, "evosdpa-tune: %s holds a search of %s, not %s\n", state_path.c_str(), st.family.c_str(),
                   space.family.c_str());
      return 1;
    }
  }
  // --generations 0 on a saved state only rewrites the report (no GPU needed), and a finished search is
  // not measured again (its float64 expectations alone took minutes on the fa3 grid).
  const bool measure = !saved || (generations > 0 && !st.done);
  Workload w;
  if (measure) {
    // Only the grid's shapes that this GPU's selection runs on the searched row: a small-grid shape
    // timed on the default row once made a row of 64-row blocks look 1.21x better for the default bucket.
    const TunedDevice dev = current_device();  // sm_count 0 without a GPU: prepare() below says so
    w.shapes = wgmma ? wgmma_shapes_of_bucket(grid_shapes, head_dim, split_keys, consumers, dev.cc, dev.sm_count)
                     : shapes_of_bucket(grid_shapes, head_dim, small_grid, dev.cc, dev.sm_count);
    if (w.shapes.empty() && dev.sm_count > 0) {
      std::fprintf(stderr, "evosdpa-tune: no shape of the %s grid runs on %s's row for it on %s (%d SMs)\n",
                   grid.c_str(), space.family.c_str(), dev.name.c_str(), dev.sm_count);
      return 3;  // nothing to search (scripts/tune.sh goes on to the next bucket)
    }
  }
  std::unique_ptr<Evaluator> evaluator;
  if (wgmma) evaluator = std::make_unique<WgmmaEvaluator>(head_dim, split_keys, consumers, w);
  else evaluator = std::make_unique<MmaEvaluator>(head_dim, small_grid, w);
  Evaluator& evaluate = *evaluator;
  if (measure) {
    if (const std::string why = evaluate.prepare(); !why.empty()) {
      std::fprintf(stderr, "evosdpa-tune: %s\n", why.c_str());
      return 1;
    }
  }
  const Evaluate fitness = [&](const Genome& g) {
    std::fprintf(stderr, "  %s ...\n", space.describe(g).c_str());
    return evaluate(g);
  };
  if (!saved) st = start(space, table, options, fitness);
  // The model the search measures on; a state is resumed on that model only.
  if (generations > 0) {
    const TunedDevice here = current_device();
    if (st.device.cc == 0) {
      st.device = here;
    } else if (st.device.cc != here.cc || st.device.sm_count != here.sm_count) {
      std::fprintf(stderr, "evosdpa-tune: %s was measured on %s (%d SMs), this is %s (%d SMs)\n", state_path.c_str(),
                   st.device.name.c_str(), st.device.sm_count, here.name.c_str(), here.sm_count);
      return 1;
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  const auto save = [&] {
    if (!state_path.empty()) std::ofstream(state_path) << to_json(st).dump(1);
    if (!report_path.empty()) {
      // The chart beside the report: r.md -> r.svg.
      const size_t dot = report_path.rfind('.'), slash = report_path.rfind('/');
      const std::string svg_path =
          (dot != std::string::npos && (slash == std::string::npos || dot > slash) ? report_path.substr(0, dot) : report_path) +
          ".svg";
      std::ofstream(svg_path) << fitness_svg(best_by_generation(st));
      std::ofstream(report_path) << report(st, space, svg_path.substr(slash == std::string::npos ? 0 : slash + 1));
    }
  };
  save();
  for (int g = 0; g < generations; ++g) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (elapsed >= seconds || !step(st, space, fitness)) break;
    save();
    std::fprintf(stderr, "generation %d: best %s at %.3fx\n", st.generation, space.describe(st.elites.front().genome).c_str(),
                 st.elites.front().speedup);
  }
  std::printf("%s", report(st, space, "").c_str());
  return 0;
}
