// The register layout of the tensor-core instruction the bf16 attention kernels use,
//   mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32   (D[16 x 8] = A[16 x 16] B[16 x 8] + C, fp32 C/D)
// as the PTX ISA states it ("Matrix Fragments for mma.m16n8k16 with floating point type"), and the
// shared-memory tile arithmetic built on it. ZERO_HD functions, so the kernels (attention_mma_kernels.cuh) and a
// host test (tests/cuda/attention_grid_test.cpp, no GPU needed) share one definition.
//
// Each lane of the warp holds: A as 8 bf16 a0..a7 in 4 32-bit registers (register r = {a[2r] low half,
// a[2r+1] high half}), B as 4 bf16 b0..b3 in 2 registers, C/D as 4 floats c0..c3. With
// group = lane / 4 and quad = lane % 4 (PTX's groupID and threadID_in_group):
//   A: a_i at row group (+8 for i = 2, 3, 6, 7), column 2 quad + (i & 1) (+8 for i >= 4)
//   B: b_i at row (k) 2 quad + (i & 1) (+8 for i >= 2), column (n) group
//   C: c_i at row group (+8 for i >= 2), column 2 quad + (i & 1)
// Two facts the kernels lean on:
//   - each register's two elements are adjacent along k, so a register is one 32-bit shared-memory load
//     from a tile stored with k contiguous (A row-major [m][k], B "n-major" [n][k]);
//   - the C fragments of two adjacent n-tiles (columns 0-7 and 8-15) are, element for element, the A
//     fragment of the 16 x 16 matrix they form (c0 c1 | c2 c3 of the first = registers 0 | 1, of the
//     second = registers 2 | 3): a softmax tile computed as C feeds the next product as A without
//     leaving registers (FlashAttention-2's P V).
#pragma once
#include <cstdint>

#include "core/math/hd.h"

namespace zero::model::cuda_attention::mma {

constexpr int kM = 16, kN = 8, kK = 16;  // the instruction's shape

struct FragIndex {
  int row = 0, col = 0;
};
ZERO_HD int lane_group(int lane) { return lane >> 2; }
ZERO_HD int lane_quad(int lane) { return lane & 3; }

// Element i (0..7) of lane's A fragment: (row, k) in the 16 x 16 tile.
ZERO_HD FragIndex a_index(int lane, int i) {
  return {lane_group(lane) + 8 * ((i >> 1) & 1), 2 * lane_quad(lane) + (i & 1) + 8 * (i >> 2)};
}
// Element i (0..3) of lane's B fragment: (k, n) in the 16 x 8 tile.
ZERO_HD FragIndex b_index(int lane, int i) { return {2 * lane_quad(lane) + (i & 1) + 8 * (i >> 1), lane_group(lane)}; }
// Element i (0..3) of lane's C/D fragment: (row, n) in the 16 x 8 tile.
ZERO_HD FragIndex c_index(int lane, int i) { return {lane_group(lane) + 8 * (i >> 1), 2 * lane_quad(lane) + (i & 1)}; }

// Element offsets, in a bf16 tile of row stride ld, of the low half of A register r (0..3) of the 16 x 16
// block at (row0, k0) of a row-major [m][k] tile, and of B register r (0..1) of the 16 x 8 block at (n0, k0)
// of an n-major [n][k] tile (K as stored for Q K^T, a transposed tile otherwise).
ZERO_HD int a_offset(int lane, int r, int ld, int row0, int k0) {
  const FragIndex e = a_index(lane, 2 * r);
  return (row0 + e.row) * ld + k0 + e.col;
}
ZERO_HD int b_offset(int lane, int r, int ld, int n0, int k0) {
  const FragIndex e = b_index(lane, 2 * r);
  return (n0 + e.col) * ld + k0 + e.row;
}

// Shared-memory tiles of the bf16 kernels: row strides in bf16 elements padded by 8. The pad keeps every
// row 16-byte aligned (16-byte global -> shared copies) and makes the 32 lanes of one fragment load (8
// rows x 4 consecutive words) fall in 32 different banks: a row of 64 or 128 bf16 plus 8 is 36 or 68
// words, 4 more than a multiple of 32, so the 8 rows start 4 banks apart.
constexpr int kPad = 8;
ZERO_HD constexpr int tile_stride(int row_elems) { return row_elems + kPad; }
ZERO_HD int bank_of_word(int word) { return word & 31; }

}  // namespace zero::model::cuda_attention::mma
