// Which keys a query sees in the attention of one sequence (positions within the sequence), the one mask
// every attention path applies: the CPU reference, the tiled emulation and both CUDA kernel paths.
//
// Causal, plus a hidden span for a pair whose answers share their first tokens (the prompt, data.share_prompt):
// such a pair is one attention sequence [shared | chosen's rest | rejected's rest], the rejected answer's tokens
// placed after the chosen's rest at the positions they would have alone. The rejected answer must not see the
// chosen's rest: keys in [hidden_begin, hidden_end) (the chosen's rest) are masked for queries at hidden_end and
// after. Every query still sees key 0 (hidden_begin >= 1, the token plan checks it), which keeps each online
// softmax row finite from the first key tile on. hidden_begin == hidden_end: plain causal.
#pragma once
#include <cstdint>

#include "core/math/hd.h"

namespace zero::math {

// The keys hidden from `query` below its causal limit, a span [begin, end) within [0, query + 1]: the hidden
// span for a query at hidden_end or after, else the empty span at query + 1. So the query sees keys [0, begin)
// and [end, query]: two runs, which the CPU reference's softmax takes whole.
struct HiddenKeys {
  int64_t begin, end;
};
ZERO_HD HiddenKeys hidden_keys(int64_t query, int64_t hidden_begin, int64_t hidden_end) {
  return query >= hidden_end ? HiddenKeys{hidden_begin, hidden_end} : HiddenKeys{query + 1, query + 1};
}

ZERO_HD bool attention_masked(int64_t query, int64_t key, int64_t hidden_begin, int64_t hidden_end) {
  const HiddenKeys h = hidden_keys(query, hidden_begin, hidden_end);
  return key > query || (key >= h.begin && key < h.end);
}

// Whether the mask hides any key of [k_first, k_last] from any query of [q_first, q_last] (attention_masked
// true for some pair of the box), exactly. When not, a kernel scores the whole box without asking per element:
// the same scores, and most boxes of a long sequence lie wholly below its diagonal.
ZERO_HD bool attention_box_masked(int64_t q_first, int64_t q_last, int64_t k_first, int64_t k_last,
                                  int64_t hidden_begin, int64_t hidden_end) {
  if (k_last > q_first) return true;  // causal: the box's last key follows its first query
  // Every key precedes every query: only a hidden span masks, for the queries at hidden_end and after.
  return hidden_begin < hidden_end && q_last >= hidden_end && k_first < hidden_end && k_last >= hidden_begin;
}

}  // namespace zero::math
