#include "search_json.hpp"

namespace evosdpa::tune {

namespace {

nlohmann::json fitness_json(const Fitness& f) {
  return {{"ok", f.ok}, {"speedup", f.speedup}, {"rel_stderr", f.rel_stderr}, {"reason", f.reason}};
}

Fitness fitness_of(const nlohmann::json& j) {
  return {j.at("ok").get<bool>(), j.at("speedup").get<double>(), j.at("rel_stderr").get<double>(),
          j.at("reason").get<std::string>()};
}

}  // namespace

nlohmann::json to_json(const State& s) {
  const Options& o = s.options;
  nlohmann::json j;
  j["options"] = {{"elites", o.elites},
                  {"levers_per_child", o.levers_per_child},
                  {"children_per_generation", o.children_per_generation},
                  {"min_gain", o.min_gain},
                  {"noise_factor", o.noise_factor},
                  {"patience", o.patience},
                  {"max_generations", o.max_generations},
                  {"max_tries", o.max_tries},
                  {"seed", o.seed}};
  j["device"] = {{"name", s.device.name}, {"cc", s.device.cc}, {"sm_count", s.device.sm_count}};
  j["family"] = s.family;
  j["rng"] = s.rng;
  j["generation"] = s.generation;
  j["stale"] = s.stale;
  j["done"] = s.done;
  j["stop_reason"] = s.stop_reason;
  j["elites"] = nlohmann::json::array();
  for (const Elite& e : s.elites)
    j["elites"].push_back({{"genome", e.genome}, {"speedup", e.speedup}, {"rel_stderr", e.rel_stderr}});
  j["log"] = nlohmann::json::array();
  for (const Record& r : s.log)
    j["log"].push_back({{"generation", r.generation},
                        {"genome", r.genome},
                        {"parent", r.parent},
                        {"fitness", fitness_json(r.fitness)},
                        {"verdict", r.verdict}});
  return j;
}

State state_from_json(const nlohmann::json& j) {
  State s;
  const nlohmann::json& o = j.at("options");
  s.options.elites = o.at("elites").get<int>();
  s.options.levers_per_child = o.at("levers_per_child").get<int>();
  s.options.children_per_generation = o.at("children_per_generation").get<int>();
  s.options.min_gain = o.at("min_gain").get<double>();
  s.options.noise_factor = o.at("noise_factor").get<double>();
  s.options.patience = o.at("patience").get<int>();
  s.options.max_generations = o.at("max_generations").get<int>();
  s.options.max_tries = o.at("max_tries").get<int>();
  s.options.seed = o.at("seed").get<uint64_t>();
  if (j.contains("device")) {  // states saved before the tuned tables have none
    const nlohmann::json& d = j.at("device");
    s.device = {d.at("name").get<std::string>(), d.at("cc").get<int>(), d.at("sm_count").get<int>()};
  }
  s.family = j.at("family").get<std::string>();
  s.rng = j.at("rng").get<std::string>();
  s.generation = j.at("generation").get<int>();
  s.stale = j.at("stale").get<int>();
  s.done = j.at("done").get<bool>();
  s.stop_reason = j.at("stop_reason").get<std::string>();
  for (const nlohmann::json& e : j.at("elites"))
    s.elites.push_back({e.at("genome").get<Genome>(), e.at("speedup").get<double>(), e.at("rel_stderr").get<double>()});
  for (const nlohmann::json& r : j.at("log"))
    s.log.push_back({r.at("generation").get<int>(), r.at("genome").get<Genome>(), r.at("parent").get<Genome>(),
                     fitness_of(r.at("fitness")), r.at("verdict").get<std::string>()});
  return s;
}

}  // namespace evosdpa::tune
