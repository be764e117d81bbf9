// `lcr shards`: token shards (docs/data.md) from the raw token arrays a tokenizer elsewhere
// wrote (core/data/shard_import.hpp), so a corpus tokenised with any tool trains with
// data.source = "shards".
#include <spdlog/spdlog.h>

#include "core/cli/verbs.hpp"
#include "core/data/shard_import.hpp"
#include "core/io/output_path.hpp"

namespace lcr::cli {

void add_shards_verb(CLI::App& app, Runner& run) {
  struct Options {
    std::vector<std::string> inputs;
    std::string dtype;
    int64_t vocab = 0;
    std::string output;
    std::string prefix = "shard";
    int64_t tokens_per_shard = 100'000'000;
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "shards", "Write token shards (docs/data.md) from raw token arrays a tokenizer produced");
  sub->add_option("-i,--input", o->inputs,
                  "raw token files, read in order as one stream: values of --dtype back to "
                  "back, little-endian, no header (numpy: ids.astype(np.uint16).tofile(path))")
      ->required()
      ->check(CLI::ExistingFile);
  sub->add_option("--dtype", o->dtype, "the values' type")
      ->required()
      ->check(CLI::IsMember(std::vector<std::string>{"uint16", "uint32", "int32"}));
  sub->add_option("--vocab", o->vocab, "the tokenizer's vocabulary size (GPT-2: 50257)")
      ->required();
  sub->add_option("-o,--output", o->output, "folder for the shards (created)")->required();
  sub->add_option("--prefix", o->prefix, "shard file names: <prefix>_00000.bin, ...")
      ->capture_default_str();
  sub->add_option("--tokens-per-shard", o->tokens_per_shard, "tokens in each shard but the last")
      ->capture_default_str();
  sub->footer(
      "Then train with data.source=\"shards\" data.paths=\"<output>\" (model.vocab_size = 0 takes "
      "the vocabulary from the shards). Nothing is overwritten.");
  sub->callback([o, &run] {
    run = [o] {
      io::check_output_path(o->output, o->inputs);  // a folder; never one of the inputs
      const auto shards =
          data::import_raw_tokens(o->inputs, data::parse_raw_token_type(o->dtype), o->vocab,
                                  o->output, o->prefix, o->tokens_per_shard);
      int64_t total = 0;
      for (const auto& s : shards) {
        spdlog::info("wrote {} ({} tokens)", s.path, s.tokens);
        total += s.tokens;
      }
      spdlog::info("{} shard(s), {} tokens, vocabulary {}: data.paths = \"{}\"", shards.size(),
                   total, o->vocab, o->output);
      return 0;
    };
  });
}

}  // namespace lcr::cli
