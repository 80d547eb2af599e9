// A sequence's hidden span as the host-side attention code reads it (the CPU reference and the tiled
// emulation; the CUDA kernels read theirs in attention_params.cuh): keys [begin, end), positions within
// the sequence, that queries at end and after do not see (core/math/attention_mask.h). begin == end: none.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>

namespace zero::model {

struct HiddenSpan {
  int64_t begin = 0, end = 0;
};

// Sequence s's span in a batch's hidden list (begin, end per sequence; empty: no sequence has one).
inline HiddenSpan hidden_span(std::span<const int32_t> hidden, size_t s) {
  return hidden.empty() ? HiddenSpan{} : HiddenSpan{hidden[2 * s], hidden[2 * s + 1]};
}

}  // namespace zero::model
