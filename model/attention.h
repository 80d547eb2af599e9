// Causal grouped-query softmax attention over variable-length sequences laid end to end in a token
// buffer (the real tokens of a batch, pads dropped): each sequence attends only within itself.
// Inputs are already projected, normed and rotated. Eager math (scores materialised per sequence and
// head), which is what the CPU backend needs for tiny models; no flash tiling.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "model/tensor_views.h"

namespace zero::model {

struct SeqSpan {
  int64_t offset = 0;  // first token column in the buffer
  int64_t len = 0;
};

struct AttentionShape {
  int64_t heads = 0;
  int64_t kv_heads = 0;  // kv head j serves q heads j*r .. j*r+r-1, r = heads / kv_heads
  int64_t head_dim = 0;
};

// q: [heads*d, N], k, v: [kv_heads*d, N]; o: [heads*d, N] (resized).
// probs (optional, for backward): one [len, len] matrix per (sequence, head), index seq*heads + head;
// column i holds query i's softmax over keys 0..i (zero above the diagonal).
void attention_forward(const Mat& q, const Mat& k, const Mat& v, const AttentionShape& s, std::span<const SeqSpan> seqs,
                       Mat& o, std::vector<Mat>* probs);

// do_: [heads*d, N] -> dq [heads*d, N], dk, dv [kv_heads*d, N] (all overwritten).
void attention_backward(const Mat& q, const Mat& k, const Mat& v, const AttentionShape& s,
                        std::span<const SeqSpan> seqs, const std::vector<Mat>& probs, const Mat& do_, Mat& dq, Mat& dk,
                        Mat& dv);

}  // namespace zero::model
