// A typed view of a model tensor (a parameter, a gradient or an activation): element type, address and
// row-major shape, in whichever memory the backend that owns it uses. No storage of its own, no
// arithmetic: the model's orchestration passes views around, the ops backend reads and writes them.
#pragma once
#include <array>
#include <cstdint>
#include <initializer_list>
#include <span>

#include "core/check.h"
#include "core/dtype.h"

namespace zero::model {

struct TensorRef {
  static constexpr int kMaxRank = 4;

  void* data = nullptr;
  DType dtype = DType::F32;
  int rank = 0;
  std::array<int64_t, kMaxRank> dims{};
  // Elements from one row's start to the next; 0: the rows are packed (row_elems()). Only columns() makes
  // other strides: the parts of a fused projection's output and gradient ([q | k | v], [gate | up]), which
  // only the ops after those projections take (model_ops.h says which tensor of which op).
  int64_t row_stride = 0;

  TensorRef() = default;
  TensorRef(void* d, DType t, std::span<const int64_t> shape) : data(d), dtype(t), rank(int(shape.size())) {
    ZERO_CHECK(rank <= kMaxRank, "tensor of rank {} (at most {})", rank, kMaxRank);
    for (int i = 0; i < rank; ++i) dims[i] = shape[i];
  }
  TensorRef(void* d, DType t, std::initializer_list<int64_t> shape)
      : TensorRef(d, t, std::span<const int64_t>(shape.begin(), shape.size())) {}

  int64_t dim(int i) const { return dims[i]; }
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < rank; ++i) n *= dims[i];
    return n;
  }
  // Activations are [rows, features...]: one row per token.
  int64_t rows() const { return rank == 0 ? 1 : dims[0]; }
  int64_t row_elems() const { return rows() == 0 ? 0 : numel() / rows(); }
  bool empty() const { return data == nullptr; }
  template <class T> T* as() const { return static_cast<T*>(data); }

  int64_t stride() const { return row_stride ? row_stride : row_elems(); }
  bool dense() const { return stride() == row_elems(); }

  // Columns [begin, begin + count) of a [rows, cols] tensor: the same rows, `count` elements each.
  TensorRef columns(int64_t begin, int64_t count) const {
    ZERO_CHECK(rank == 2 && begin >= 0 && count >= 0 && begin + count <= dims[1],
               "columns [{}, {}) of a rank-{} tensor of {} columns", begin, begin + count, rank, rank == 2 ? dims[1] : 0);
    TensorRef r(static_cast<char*>(data) + begin * int64_t(dtype_size(dtype)), dtype, {dims[0], count});
    r.row_stride = stride();
    return r;
  }

  // The same memory under another shape with as many elements.
  TensorRef reshaped(std::initializer_list<int64_t> shape) const {
    ZERO_CHECK(dense(), "reshape of a strided view");
    TensorRef r(data, dtype, shape);
    ZERO_CHECK(r.numel() == numel(), "reshape of {} elements into {}", numel(), r.numel());
    return r;
  }
};

}  // namespace zero::model
