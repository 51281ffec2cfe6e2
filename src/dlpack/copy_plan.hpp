#pragma once
// How the elements of a tensor with any strides are gathered into a compact row-major copy: a
// few rectangles of bytes, each one cudaMemcpy2DAsync (one cudaMemcpyAsync per row where a pitch
// passes the driver's memPitch; one loop of memcpy on the host).
#include <cstddef>
#include <cstdint>
#include <vector>

#include <dlpack/dlpack.h>

#include "holoscan/expected.hpp"
#include "holoscan/export.hpp"

namespace holoscan::detail {

/** @brief `height` rows of `width` bytes: a source row every `source_pitch` bytes, copied to a
 *         destination row every `destination_pitch` bytes. */
struct HOLOSCAN_DLPACK_ABI CopyPiece {
  std::int64_t source_offset = 0;       ///< Bytes from the source's first element (may be < 0).
  std::int64_t destination_offset = 0;  ///< Bytes from the start of the copy.
  std::size_t width = 0;                ///< Bytes of one row.
  std::size_t height = 1;               ///< Rows.
  std::size_t source_pitch = 0;         ///< Bytes between source rows (>= width).
  std::size_t destination_pitch = 0;    ///< Bytes between destination rows (>= width).
};

/**
 * @brief The pieces that copy a validated tensor into a compact row-major buffer.
 *
 * Dimensions whose elements follow each other are merged into one row; a dimension whose rows
 * do not overlap nor go backwards gives the row count (the next one out if it can, else the
 * longest); every other dimension (negative, zero or overlapping strides) is walked on the host,
 * one piece per index. A contiguous tensor is one piece.
 */
class HOLOSCAN_DLPACK_ABI CopyPlan {
 public:
  /**
   * @brief The plan for `view` (already validated). Packed sub-byte elements can only be copied
   *        whole: a non-contiguous packed tensor is kNotSupported.
   */
  static expected<CopyPlan, Error> of(const DLTensor& view, std::uint64_t flags, const char* who);

  /** @brief Bytes of the compact copy. */
  std::int64_t bytes() const noexcept { return bytes_; }

  /** @brief Calls `visit(piece)` for each piece in order; stops at the first failure. */
  template <class Visit>
  expected<void, Error> for_each_piece(Visit&& visit) const {
    if (bytes_ == 0) {
      return {};
    }
    std::vector<std::int64_t> index(outer_.size(), 0);
    CopyPiece piece = first_;
    while (true) {
      if (auto done = visit(piece); !done) {
        return done;
      }
      if (!advance(index, piece)) {
        return {};
      }
    }
  }

 private:
  struct Dim {
    std::int64_t extent = 0;
    std::int64_t source_stride = 0;       // bytes
    std::int64_t destination_stride = 0;  // bytes
  };

  static constexpr std::size_t kNoRows = static_cast<std::size_t>(-1);
  // Which of `dims` (innermost last) gives the rows of `width` bytes; kNoRows when none can.
  static std::size_t rows_dimension(const std::vector<Dim>& dims, std::int64_t width) noexcept;

  // Moves `piece` to the next index of the outer dimensions; false after the last one.
  bool advance(std::vector<std::int64_t>& index, CopyPiece& piece) const noexcept;

  std::vector<Dim> outer_;  // walked on the host, outermost first
  CopyPiece first_;         // the piece at outer index 0
  std::int64_t bytes_ = 0;
};

}  // namespace holoscan::detail
