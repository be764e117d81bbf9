#pragma once
// What travels the ring, per scheme: the per-scheme "ring message" (DESIGN.md section 1:
// a position scheme owns its description of what a ring step must carry; the
// descriptions sit here, next to the ring that reads them, until the scheme units grow
// their own).
//
// Every field is a per-KEY-ROW tensor [B, rows, heads, width] of a key chunk, already in
// the form the kernel consumes (computed by the chunk's owner from GLOBAL positions), so
// a visiting chunk never needs its owner's raw inputs:
//   dot-product family   k_lanes [Hkv, lane width]  (RoPE-rotated k, GOAT's augmented k'
//                                                    with the u_h(j) lane, PoPE's re/im)
//                        v       [Hkv, dv]
//                        fox_ck  [H, 1]             (FoX: global cumulative gate c_j)
//   PaTH, PaTH-FoX       k_folded [Hkv, d]  (keys pushed to their chunk's right boundary)
//                        v, and fox_ck for PaTH-FoX;
//                        plus chunk_transitions: the per-chunk P_c, exchanged among all
//                        ranks once per step (allgather), not around the ring.
// In the backward pass the gradients of the same fields travel the ring home in the
// same packing (dk_lanes, dv, dfox_ck), so one description serves both directions.
//
// A message packs the fields of ALL chunks one rank holds (zigzag: two), chunk-major,
// each field contiguous and row-major, so unpacking is a zero-copy view.
#include <string>
#include <vector>

#include "kernels/attention/spec.hpp"
#include "kernels/base/tensor.hpp"
#include "parallel/ring/layout.hpp"

namespace lcr {

struct RingField {
  std::string name;
  int heads = 1;
  int width = 1;
};

struct RingMessage {
  std::vector<RingField> fields;
  bool chunk_transitions = false;               // PaTH: P_c per chunk, allgathered (not yet built)
  int index_of(const std::string& name) const;  // Error if absent
};

// lane_width: width of the scheme's key lanes (PreparedAttention::sdpa.k extent 3).
RingMessage ring_message(const AttentionSpec& spec, int lane_width);

// Where each (chunk, field) of one rank's message sits in the packed buffer.
struct PackedPlan {
  int batch = 0;
  std::vector<int> chunks;                   // global chunk indices, the owner's order
  std::vector<int64_t> rows;                 // rows of each chunk
  std::vector<std::vector<int64_t>> offset;  // [chunk slot][field], in elements
  int64_t total = 0;                         // elements in the message
};

PackedPlan packed_plan(const RingMessage& msg, const SeqLayout& layout, int owner, int batch);

// Zero-copy view of one field of one chunk inside a packed buffer.
template <class T>
View4<T> packed_field(T* base, const RingMessage& msg, const PackedPlan& plan, int slot,
                      int field) {
  const RingField& f = msg.fields[size_t(field)];
  return View4<T>(base + plan.offset[size_t(slot)][size_t(field)], size_t(plan.batch),
                  size_t(plan.rows[size_t(slot)]), size_t(f.heads), size_t(f.width));
}

}  // namespace lcr
