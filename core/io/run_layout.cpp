// The standard run-file tables (docs/run-file.md lists them with their meaning).
#include "core/io/run_layout.hpp"

#include "kernels/base/error.hpp"

namespace lcr::io {

const Column& Table::at(const std::string& name) const {
  std::string have;
  for (const auto& c : columns) {
    if (c.name == name) return c;
    have += (have.empty() ? "" : ", ") + c.name;
  }
  throw_error("table ", path, " has no column '", name, "' (columns: ", have, ")");
}

const Table& RunLayout::at(const std::string& path) const {
  std::string have;
  for (const auto& t : tables) {
    if (t.path == path) return t;
    have += (have.empty() ? "" : ", ") + t.path;
  }
  throw_error("the run file has no table '", path, "' (tables: ", have, ")");
}

Table metrics_table(const std::vector<std::string>& extra) {
  Table t{"metrics", "training metrics, one row per logged step", {}};
  t.columns = {{"loss", {}, DType::F64, "mean training cross-entropy of the step (nats/token)"},
               {"lr", {}, DType::F64, "learning rate used by the step"},
               {"grad_norm", {}, DType::F64, "global gradient L2 norm before clipping"},
               {"tokens_per_s", {}, DType::F64, "training throughput, all ranks"},
               {"memory_bytes", {}, DType::F64, "peak device memory of the writing rank"}};
  for (const auto& n : extra) t.columns.push_back({n, {}, DType::F64, "extra metric"});
  return t;
}

Table perplexity_table() {
  return {"eval/perplexity",
          "perplexity vs evaluation length, one row per (step, length)",
          {{"length", {}, DType::I64, "evaluation context length (tokens)"},
           {"loss", {}, DType::F64, "mean cross-entropy (nats/token)"},
           {"ppl", {}, DType::F64, "exp(loss)"}}};
}

Table passkey_table() {
  return {"eval/passkey",
          "passkey retrieval accuracy, one row per (step, length, depth)",
          {{"length", {}, DType::I64, "context length (tokens)"},
           {"depth", {}, DType::F64, "passkey position as a fraction of the context (0..1)"},
           {"accuracy", {}, DType::F64, "fraction of samples whose key is reproduced"}}};
}

std::vector<Table> prior_tables(const PriorShapes& s) {
  const auto need = [&](int64_t v, const char* what) {
    require(v > 0, "prior tables for scheme '", s.scheme, "' need ", what, " > 0 (got ", v, ")");
  };
  need(s.layers, "layers");
  need(s.heads, "heads");
  need(s.kv_heads, "kv_heads");
  const int64_t H = s.heads, K = s.kv_heads;
  std::vector<Column> cols = {
      {"entropy", {H}, DType::F32, "attention entropy per head (nats), mean over probe rows"},
      {"max_logit", {H}, DType::F32, "largest softmax logit per head"},
      {"first_token_mass", {H}, DType::F32, "attention weight on position 0, mean over rows"}};
  const std::string& sc = s.scheme;
  if (sc == "goat" || sc == "goat2d") {
    require(s.goat_modes >= 0, "prior tables for scheme '", s.scheme,
            "' need goat_modes >= 0 (got ", s.goat_modes, ")");
    need(int64_t(s.goat_lags.size()), "goat_lags");
    need(int64_t(s.goat_positions.size()), "goat_positions");
    const int64_t R = s.goat_modes;
    if (R > 0) {  // R = 0 (no relative prior): no per-mode columns
      cols.push_back({"alpha", {H, R}, DType::F32, "GOAT mode decay alpha_h,r"});
      cols.push_back({"beta", {H, R}, DType::F32, "GOAT mode frequency beta_h,r"});
      cols.push_back({"amplitude", {H, R}, DType::F32, "GOAT per-mode amplitude"});
      cols.push_back({"beta_alpha_ratio", {H, R}, DType::F32, "|beta| / |alpha| per mode"});
    }
    cols.push_back({"prior_curve",
                    {H, int64_t(s.goat_lags.size())},
                    DType::F32,
                    "relative prior at the lags of /priors/goat_lags"});
    cols.push_back({"u",
                    {K, int64_t(s.goat_positions.size())},
                    DType::F32,
                    "key prior u_h(j) at the positions of /priors/goat_positions"});
  } else if (sc == "pope") {
    need(s.pope_dim, "pope_dim");
    const int64_t d = s.pope_dim;
    cols.push_back({"q_usage", {H, d}, DType::F32, "mean query magnitude per frequency"});
    cols.push_back({"k_usage", {K, d}, DType::F32, "mean key magnitude per frequency"});
    cols.push_back({"delta", {K, d}, DType::F32, "PoPE key phase bias per frequency"});
  } else if (sc == "rope") {
    need(s.rope_pairs, "rope_pairs");
    cols.push_back({"q_pair_norm", {H, s.rope_pairs}, DType::F32, "mean query norm per pair"});
    cols.push_back({"k_pair_norm", {K, s.rope_pairs}, DType::F32, "mean key norm per pair"});
  } else if (sc == "path" || sc == "path_fox") {
    cols.push_back({"beta_stats", {K, 4}, DType::F32, "PaTH beta: mean, std, min, max"});
  }
  std::vector<Table> out;
  for (int64_t l = 0; l < s.layers; ++l)
    out.push_back({"priors/layer_" + std::to_string(l), "layer " + std::to_string(l), cols});
  return out;
}

RunLayout standard_layout(const PriorShapes& s, const std::vector<std::string>& extra_metrics) {
  RunLayout L;
  L.tables = {metrics_table(extra_metrics), perplexity_table(), passkey_table()};
  for (auto& t : prior_tables(s)) L.tables.push_back(std::move(t));
  L.attrs["priors"] = {{"scheme", s.scheme},         {"layers", s.layers},
                       {"heads", s.heads},           {"kv_heads", s.kv_heads},
                       {"goat_modes", s.goat_modes}, {"pope_dim", s.pope_dim},
                       {"rope_pairs", s.rope_pairs}};
  if (!s.goat_lags.empty()) L.axes["priors/goat_lags"] = s.goat_lags;
  if (!s.goat_positions.empty()) L.axes["priors/goat_positions"] = s.goat_positions;
  return L;
}

}  // namespace lcr::io
