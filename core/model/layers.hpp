#pragma once
// The model's elementwise and row-wise layers, forward and backward (llm.c style: explicit
// buffers, plain functions). Rows are flattened positions r = b L + t; a [R, D] view is
// row-major. Backward functions ADD into parameter gradients (so micro-batches accumulate)
// and say for each input gradient whether it is overwritten or added.
// Every reduction is owned by one thread in a fixed order: results are bitwise
// deterministic on every backend.
#include <cstdint>

#include "kernels/base/tensor.hpp"

namespace lcr {

template <class T>
using CView1 = View1<const T>;
template <class T>
using CView2 = View2<const T>;

// y = x / sqrt(mean_d x^2 + eps) * g;  x, y [R, D], g [D], rstd [R] (saved for backward).
template <class T>
void rmsnorm_forward(const CView2<T>& x, const CView1<T>& g, T eps, const View2<T>& y,
                     const View1<T>& rstd);
// dx ADDED (so the residual gradient flows through unchanged), dg ADDED.
template <class T>
void rmsnorm_backward(const CView2<T>& x, const CView1<T>& g, const CView1<T>& rstd,
                      const CView2<T>& dy, const View2<T>& dx, const View1<T>& dg);

// h = silu(gate) * up; all [R, F].
template <class T>
void swiglu_forward(const CView2<T>& gate, const CView2<T>& up, const View2<T>& h);
// dgate, dup overwritten.
template <class T>
void swiglu_backward(const CView2<T>& gate, const CView2<T>& up, const CView2<T>& dh,
                     const View2<T>& dgate, const View2<T>& dup);

// x[r] = E[tokens[r]]; tokens [R] (already checked to lie in [0, V)), E [V, D], x [R, D].
template <class T>
void embedding_forward(const View1<const int32_t>& tokens, const CView2<T>& E, const View2<T>& x);
// dE[tokens[r]] += dx[r]: one thread per column d walks the rows in order (no atomics).
template <class T>
void embedding_backward(const View1<const int32_t>& tokens, const CView2<T>& dx,
                        const View2<T>& dE);

// y[r, :] += b (row broadcast); y [R, N], b [N].
template <class T>
void add_bias(const CView1<T>& b, const View2<T>& y);
// db += sum_r dy[r, :].
template <class T>
void bias_backward(const CView2<T>& dy, const View1<T>& db);

// y += a x over n values (raw device pointers).
template <class T>
void axpy(int64_t n, T a, const T* x, T* y);
// Copies n values.
template <class T>
void copy_values(int64_t n, const T* x, T* y);

}  // namespace lcr
