#pragma once
// Cross-entropy of the LM head's logits against next-token labels. Rows with label < 0
// (label -1: padding, prompt, or a position whose target lives on another rank) are
// ignored: loss 0, gradient 0.
#include <cstdint>

#include "kernels/base/tensor.hpp"

namespace lcr {

// logits [R, V], labels [R] (each < V, checked by the caller) ->
//   lse [R] = log sum_v exp(logits[r, v]),  row_loss [R] = lse - logits[r, label] (0 if ignored)
template <class T>
void cross_entropy_forward(const View2<const T>& logits, const View1<const int32_t>& labels,
                           const View1<T>& lse, const View1<T>& row_loss);

// dlogits[r, v] = scale (softmax(logits[r])_v - 1{v = label}) for labelled rows, 0 otherwise.
// scale = 1 / (the loss's denominator). dlogits may be the logits view itself (in place).
template <class T>
void cross_entropy_backward(const View2<const T>& logits, const View1<const int32_t>& labels,
                            const View1<const T>& lse, T scale, const View2<T>& dlogits);

}  // namespace lcr
