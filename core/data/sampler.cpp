#include "core/data/sampler.hpp"

#include "core/data/rng.hpp"
#include "kernels/base/error.hpp"

namespace lcr::data {
namespace {

// Stream salts keep the two modes' and the epoch shuffles' keys apart.
constexpr uint64_t kChunkSalt = 0x6368756E6B73ull;     // "chunks"
constexpr uint64_t kOffsetSalt = 0x6F666673657473ull;  // "offsets"

}  // namespace

uint64_t permute_index(uint64_t i, uint64_t n, uint64_t key) {
  if (n <= 1) return 0;
  int bits = 2;
  while (bits < 64 && (uint64_t{1} << bits) < n) bits += 2;
  const int half = bits / 2;
  const uint64_t mask = (uint64_t{1} << half) - 1;
  uint64_t x = i;
  do {  // cycle-walk: re-encrypt until the value is back inside [0, n)
    uint64_t left = x >> half, right = x & mask;
    for (int round = 0; round < 4; ++round) {
      const uint64_t f = splitmix64(right ^ derive_key(key, static_cast<uint64_t>(round))) & mask;
      const uint64_t next = left ^ f;
      left = right;
      right = next;
    }
    x = (left << half) | right;
  } while (x >= n);
  return x;
}

int64_t window_start(int64_t source_size, uint64_t seed, int64_t seq_len, SamplingMode mode,
                     uint64_t global_index) {
  require(seq_len >= 1, "seq_len must be >= 1, got ", seq_len);
  require(source_size >= seq_len + 1, "the data has ", source_size,
          " tokens; one window of seq_len + 1 = ", seq_len + 1,
          " tokens does not fit. Use a shorter seq_len or more data (--data <path>).");
  if (mode == SamplingMode::random_offsets) {
    Rng rng(derive_key(seed, kOffsetSalt, global_index));
    return rng.uniform(source_size - seq_len);  // starts in [0, N - L - 1]
  }
  const uint64_t chunks = static_cast<uint64_t>((source_size - 1) / seq_len);
  const uint64_t epoch = global_index / chunks, within = global_index % chunks;
  const uint64_t chunk = permute_index(within, chunks, derive_key(seed, kChunkSalt, epoch));
  return static_cast<int64_t>(chunk) * seq_len;
}

Windows sample_windows(const TokenSource& source, const SampleRequest& r) {
  require(r.dp_size >= 1, "dp_size must be >= 1, got ", r.dp_size);
  require(r.dp_rank >= 0 && r.dp_rank < r.dp_size, "dp_rank ", r.dp_rank,
          " is outside [0, dp_size = ", r.dp_size, ")");
  require(r.batch >= 1, "batch must be >= 1, got ", r.batch);
  require(r.step >= 0, "step must be >= 0, got ", r.step);
  Windows w;
  w.batch = r.batch;
  w.seq_len = r.seq_len;
  w.tokens.resize(r.batch * (r.seq_len + 1));
  w.starts.resize(r.batch);
  const uint64_t first =
      (static_cast<uint64_t>(r.step) * r.dp_size + r.dp_rank) * static_cast<uint64_t>(r.batch);
  for (int64_t b = 0; b < r.batch; ++b) {
    w.starts[b] = window_start(source.size(), r.seed, r.seq_len, r.mode, first + b);
    source.read(w.starts[b], r.seq_len + 1, w.tokens.data() + b * (r.seq_len + 1));
  }
  return w;
}

Batch to_lm_batch(const Windows& w, int32_t vocab_size) {
  Batch out(w.batch, w.seq_len, vocab_size);
  for (int64_t b = 0; b < w.batch; ++b) {
    const int32_t* row = w.tokens.data() + b * (w.seq_len + 1);
    for (int64_t t = 0; t < w.seq_len; ++t) {
      out.tokens_row(b)[t] = row[t];
      out.labels_row(b)[t] = row[t + 1];
    }
  }
  return out;
}

Batch sample_lm_batch(const TokenSource& source, const SampleRequest& request) {
  return to_lm_batch(sample_windows(source, request), source.vocab_size());
}

SamplingMode sampling_mode_from_name(const std::string& name) {
  if (name == "shuffled_chunks") return SamplingMode::shuffled_chunks;
  if (name == "random_offsets") return SamplingMode::random_offsets;
  throw_error("unknown sampling mode '", name, "'; valid modes: shuffled_chunks, random_offsets");
}

const char* sampling_mode_name(SamplingMode mode) {
  return mode == SamplingMode::shuffled_chunks ? "shuffled_chunks" : "random_offsets";
}

}  // namespace lcr::data
