#include "parallel/ring/message.hpp"

#include "kernels/base/error.hpp"

namespace lcr {

int RingMessage::index_of(const std::string& name) const {
  for (size_t i = 0; i < fields.size(); ++i)
    if (fields[i].name == name) return int(i);
  throw_error("ring message has no field '", name, "'");
}

RingMessage ring_message(const AttentionSpec& spec, int lane_width) {
  RingMessage m;
  const bool path = is_path(spec.scheme);
  m.fields.push_back({path ? "k_folded" : "k_lanes", spec.kv_heads, lane_width});
  m.fields.push_back({"v", spec.kv_heads, spec.v_dim()});
  if (uses_fox(spec.scheme)) m.fields.push_back({"fox_ck", spec.heads, 1});
  m.chunk_transitions = path;
  return m;
}

PackedPlan packed_plan(const RingMessage& msg, const SeqLayout& layout, int owner, int batch) {
  PackedPlan p;
  p.batch = batch;
  for (int c : layout.chunks_of(owner)) {
    p.chunks.push_back(c);
    p.rows.push_back(layout.chunk(c).length);
    std::vector<int64_t> off;
    for (const auto& f : msg.fields) {
      off.push_back(p.total);
      p.total += int64_t(batch) * layout.chunk(c).length * f.heads * f.width;
    }
    p.offset.push_back(std::move(off));
  }
  return p;
}

}  // namespace lcr
