// The emulator builds' entry points (path.hpp includes this inside namespace path::emu and
// path::emu_mma, one per kernel form): forward, backward, carry and the matrix products with
// the GPU functions' contracts, on host pointers. No include guard: included once per
// namespace.
void forward(const Args& a, __nv_bfloat16* o, float* lse, void* workspace,
             std::size_t workspace_bytes, const Folds* folds = nullptr);
void backward(const Args& a, const __nv_bfloat16* o, const float* lse, const __nv_bfloat16* dout,
              const Grads& g, void* workspace, std::size_t workspace_bytes,
              const FoldGrads* fold_grads = nullptr);
void carry(int B, int L, int H, int Hkv, int D, const float* M, const float* q, __nv_bfloat16* y);
void carry_backward(int B, int L, int H, int Hkv, int D, const float* M, const float* q,
                    const float* dy, float* dq, float* dM);
void mat_products(int batch, int D, const float* A, bool transpose_a, const float* B,
                  bool transpose_b, float* C, bool accumulate);
