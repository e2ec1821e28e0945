#include "tuned_table.hpp"

#include <algorithm>
#include <cstdio>
#include <functional>

#include "kernels/mma/mma_config.hpp"
#include "spaces.hpp"

namespace evosdpa::tune {

bool parse_mma_family(const std::string& family, int& head_dim, bool& small_grid) {
  for (const int d : {64, 128})
    for (const bool small : {false, true})
      if (family == mma_sm80_space(d, small).family) {
        head_dim = d, small_grid = small;
        return true;
      }
  return false;
}

bool parse_wgmma_family(const std::string& family, int& head_dim, bool& split_keys, int& consumers) {
  for (const detail::wgmma_sm90::TileConfig& c : detail::wgmma_sm90::kHandRows)
    if (!c.fp8 && family == wgmma_sm90_space(c.head_dim, c.split_keys, c.consumers).family) {
      head_dim = c.head_dim, split_keys = c.split_keys, consumers = c.consumers;
      return true;
    }
  return false;
}

Genome table_choice(const State& st, const Genome& table_row) {
  const auto best = std::max_element(st.elites.begin(), st.elites.end(),
                                     [](const Elite& a, const Elite& b) { return a.speedup < b.speedup; });
  if (best == st.elites.end()) return table_row;
  // The row as measured in the search where it is still an elite, else the baseline it was timed against.
  Elite row{table_row, 1.0, 0.0};
  for (const Elite& e : st.elites)
    if (e.genome == table_row) row = e;
  return accepts(row, Fitness{true, best->speedup, best->rel_stderr, {}}, st.options) ? best->genome : table_row;
}

std::string tuned_file_name(const TunedDevice& d) {
  return "sm" + std::to_string(d.cc) + "_" + std::to_string(d.sm_count) + ".inc";
}

namespace {

// The file of either family: a header naming the model and the row's fields (`fields`, comment lines),
// then per entry the search it came from and its row (`row`: one kTunedRows initialiser line).
std::string table_text(const char* family, const char* fields, const TunedDevice& d,
                       const std::vector<TunedEntry>& entries, const std::function<std::string(const TunedEntry&)>& row) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "// %s's tuned table for %s (compute capability %d.%d, %d SMs), written by\n", family,
                d.name.c_str(), d.cc / 10, d.cc % 10, d.sm_count);
  std::string out = std::string(buf) + fields;
  for (const TunedEntry& e : entries) {
    if (e.hand_row)
      std::snprintf(buf, sizeof buf, "// %s: the hand-made row (best elite %.3fx, under the search's gain)\n",
                    e.source.c_str(), e.best);
    else
      std::snprintf(buf, sizeof buf, "// %s: %.3fx against the hand-made row\n", e.source.c_str(), e.best);
    out += buf + row(e);
  }
  return out;
}

}  // namespace

std::string tuned_file_text(const TunedDevice& d, const std::vector<TunedEntry>& entries) {
  std::vector<TunedEntry> rows = entries;
  std::sort(rows.begin(), rows.end(), [](const TunedEntry& a, const TunedEntry& b) {
    return a.head_dim != b.head_dim ? a.head_dim < b.head_dim : a.small_grid < b.small_grid;
  });
  return table_text(
      "mma_sm80",
      "// evosdpa-tune --emit-table; each row: {cc, SMs, {head_dim, warps, m_tiles, block_n, min_blocks_per_sm,\n"
      "// q_in_registers, small_grid}} (mma_config.hpp's TunedRow), from the search named above it.\n",
      d, rows, [&](const TunedEntry& e) {
        const detail::mma_sm80::TileConfig c = mma_sm80_config(e.genome, e.head_dim, e.small_grid);
        char buf[128];
        std::snprintf(buf, sizeof buf, "{%d, %d, {%d, %d, %d, %d, %d, %s, %s}},\n", d.cc, d.sm_count, c.head_dim,
                      c.warps, c.m_tiles, c.block_n, c.min_blocks_per_sm, c.q_in_registers ? "true" : "false",
                      c.small_grid ? "true" : "false");
        return std::string(buf);
      });
}

std::string wgmma_tuned_file_text(const TunedDevice& d, const std::vector<TunedEntry>& entries) {
  std::vector<TunedEntry> rows = entries;
  std::sort(rows.begin(), rows.end(), [](const TunedEntry& a, const TunedEntry& b) {
    return a.head_dim != b.head_dim ? a.head_dim < b.head_dim
           : a.split_keys != b.split_keys ? a.split_keys < b.split_keys
                                          : a.consumers > b.consumers;
  });
  return table_text(
      "wgmma_sm90",
      "// evosdpa-tune --emit-table; each row: {cc, SMs, {head_dim, block_n, stages, consumers, producer_regs,\n"
      "// consumer_regs, row_speed, causal_row_speed, split_keys, fp8}} (wgmma_config.hpp's TunedRow), from the\n"
      "// search named above it.\n",
      d, rows, [&](const TunedEntry& e) {
        const detail::wgmma_sm90::TileConfig c = wgmma_sm90_row(e.genome, e.head_dim, e.split_keys);
        char buf[160];
        std::snprintf(buf, sizeof buf, "{%d, %d, {%d, %d, %d, %d, %d, %d, %.17g, %.17g, %s, false}},\n", d.cc,
                      d.sm_count, c.head_dim, c.block_n, c.stages, c.consumers, c.producer_regs, c.consumer_regs,
                      c.row_speed, c.causal_row_speed, c.split_keys ? "true" : "false");
        return std::string(buf);
      });
}

std::string with_index_line(const std::string& index_text, const std::string& file_name) {
  const std::string line = "#include \"" + file_name + "\"\n";
  if (index_text.find(line) != std::string::npos) return index_text;
  std::string out = index_text;
  if (!out.empty() && out.back() != '\n') out += '\n';
  return out + line;
}

std::vector<host::Shape> shapes_of_bucket(const std::vector<host::Shape>& shapes, int head_dim, bool small_grid, int cc,
                                          int sm_count) {
  namespace mma = detail::mma_sm80;
  std::vector<host::Shape> out;
  for (const host::Shape& s : shapes) {
    if (s.head_dim != head_dim) continue;
    const int row = mma::choose_config(head_dim, s.batch * s.heads_q, s.seqlen_q, sm_count, cc);
    if (row >= 0 && mma::kConfigs[row].small_grid == small_grid) out.push_back(s);
  }
  return out;
}

std::vector<host::Shape> wgmma_shapes_of_bucket(const std::vector<host::Shape>& shapes, int head_dim, bool split_keys,
                                                int consumers, int cc, int sm_count) {
  namespace wg = detail::wgmma_sm90;
  std::vector<host::Shape> out;
  for (const host::Shape& s : shapes) {
    if (s.head_dim != head_dim) continue;
    const wg::Choice c = wg::choose_config(head_dim, s.batch * s.heads_q, s.seqlen_q, s.seqlen_k,
                                           s.causal != EVOSDPA_CAUSAL_NONE, sm_count, false, cc);
    if (c.row >= 0 && c.splits == 1 && wg::kConfigs[c.row].split_keys == split_keys &&
        wg::kConfigs[c.row].consumers == consumers)
      out.push_back(s);
  }
  return out;
}

}  // namespace evosdpa::tune
