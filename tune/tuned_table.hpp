// The tuned tables evosdpa-tune writes (issue 10): from finished searches on one GPU model, a source file
// of kTunedRows rows (src/kernels/mma/mma_config.hpp, src/kernels/wgmma/wgmma_config.hpp) that the build
// compiles in and that selection uses on that model (compute capability and SM count) in place of the
// hand-made rows.
#pragma once

#include <string>
#include <vector>

#include "genome.hpp"
#include "host/host_tensor.hpp"
#include "search.hpp"

namespace evosdpa::tune {

// One search's contribution: its bucket and chosen genome.
struct TunedEntry {
  std::string source;  // the state file it came from, named in the file's comment
  int head_dim = 0;
  bool small_grid = false;  // mma_sm80: default or small-grid variant
  Genome genome;
  double best = 1.0;      // the search's fastest elite against the table's row
  bool hand_row = true;   // the table's row held (no elite beat it by the search's gain)
  bool split_keys = false;  // wgmma_sm90: split_keys row, and its consumer count
  int consumers = 0;
};

// "mma_sm80/d64" or "mma_sm80/d128/small_grid" -> head_dim and variant; false for any other family.
bool parse_mma_family(const std::string& family, int& head_dim, bool& small_grid);

// "wgmma_sm90/d64/c3" or "wgmma_sm90/d128/c2/split_keys" -> the bucket; false for any other family.
bool parse_wgmma_family(const std::string& family, int& head_dim, bool& split_keys, int& consumers);

// The genome a search puts in its model's table: its fastest elite where the search's own rule (accepts:
// max(min_gain, noise_factor x the combined error)) says it beat the table's row, else the row: a tie
// within the noise keeps the hand-made choice.
Genome table_choice(const State& st, const Genome& table_row);

// The table's file name for a model: "sm90_132.inc" (compute capability 9.0, 132 SMs).
std::string tuned_file_name(const TunedDevice& d);

// The file: a comment naming the model and each row's search, then one kTunedRows initialiser per entry;
// mma_sm80's, or wgmma_sm90's (each row with the speeds of the hand-made row it replaces).
std::string tuned_file_text(const TunedDevice& d, const std::vector<TunedEntry>& entries);
std::string wgmma_tuned_file_text(const TunedDevice& d, const std::vector<TunedEntry>& entries);

// index.inc with an #include of `file_name` added unless it is there.
std::string with_index_line(const std::string& index_text, const std::string& file_name);

// The shapes of `shapes` that mma_sm80's selection runs on the bucket (head_dim, small_grid) on a GPU of
// compute capability cc (major * 10 + minor) with sm_count SMs: a search measures its row on these only,
// so that its fitness is what the table's row would change.
std::vector<host::Shape> shapes_of_bucket(const std::vector<host::Shape>& shapes, int head_dim, bool small_grid, int cc,
                                          int sm_count);

// The same for wgmma_sm90's bucket (head_dim, split_keys, consumers), 16-bit inputs: the shapes whose
// choice (choose_config) is the bucket's row run as the persistent grid (no cluster split, which runs
// other kernels of the row).
std::vector<host::Shape> wgmma_shapes_of_bucket(const std::vector<host::Shape>& shapes, int head_dim, bool split_keys,
                                                int consumers, int cc, int sm_count);

}  // namespace evosdpa::tune
