// A search's state as JSON, so that evosdpa-tune can stop between generations (a device call is limited
// to minutes) and resume exactly: the options, the elites, the log and the generator's state.
#pragma once

#include <nlohmann/json.hpp>

#include "search.hpp"

namespace evosdpa::tune {

nlohmann::json to_json(const State& state);
// Throws nlohmann::json::exception on a malformed document.
State state_from_json(const nlohmann::json& j);

}  // namespace evosdpa::tune
