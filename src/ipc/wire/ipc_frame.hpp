#pragma once
// The channel's frames: an 8-byte header (type, payload length) and the payload, one frame per
// SOCK_SEQPACKET record. Encoding and parsing are pure, so the socket code only moves bytes and
// descriptors.
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "holoscan/expected.hpp"
#include "holoscan/ipc/message.hpp"

namespace holoscan::ipc::detail {

/** @brief Bytes of the frame header: u32 type, u32 payload length. */
inline constexpr std::size_t kFrameHeaderBytes = 8;

/** @brief Bytes of a Publish's payload before its descriptor: u64 forget_allocation. */
inline constexpr std::size_t kPublishHeaderBytes = 8;

/** @brief Bytes of the largest valid frame (a Publish of the largest descriptor). */
inline constexpr std::size_t kMaxFrameBytes =
    kFrameHeaderBytes + kPublishHeaderBytes + kMaxDescriptorBytes;

/** @brief One encoded frame, held in place: encoding allocates nothing, so sending cannot run
 *         out of memory. */
struct Frame {
  std::array<std::uint8_t, kMaxFrameBytes> bytes{};  ///< The frame, in its first `size` bytes.
  std::size_t size = 0;                              ///< Bytes used.
};

/** @brief The frame of `hello`, refused when the peer would refuse it. */
expected<Frame, Error> encode_frame(const Hello& hello);
/** @brief The frame of `publish` (its fd travels beside it), refused likewise. */
expected<Frame, Error> encode_frame(const Publish& publish);
/** @brief The frame of `release`, refused likewise. */
expected<Frame, Error> encode_frame(const Release& release);

/**
 * @brief The export id of `bytes` when they are a Publish frame whose descriptor decodes (out of
 *        memory to decode it: read from its field), so that a refused one can be given back;
 *        nullopt for anything else. Never throws.
 */
HOLOSCAN_DLPACK_ABI std::optional<std::uint64_t> publish_export_id(const std::uint8_t* bytes,
                                                                   std::size_t size) noexcept;

/** @brief What a Publish frame says of the allocations an importer holds mappings of. */
struct PublishAllocations {
  std::uint64_t fd_allocation = 0;  ///< Its allocation id when its handle kind is kPosixFd, else 0.
  std::uint64_t forget = 0;         ///< Its forget_allocation.
};

/**
 * @brief The allocations `bytes` name when they are a Publish frame whose descriptor decodes (see
 *        publish_export_id()), so that a refused one still keeps the importer's mappings as its
 *        exporter counts them; zeros for anything else. Never throws.
 */
HOLOSCAN_DLPACK_ABI PublishAllocations publish_allocations(const std::uint8_t* bytes,
                                                           std::size_t size) noexcept;

/** @brief The allocation id of descriptor bytes that decoded before, when their handle kind is
 *         kPosixFd; 0 otherwise or for bytes too short for a descriptor. Never throws. */
HOLOSCAN_DLPACK_ABI std::uint64_t descriptor_fd_allocation(const std::uint8_t* bytes,
                                                           std::size_t size) noexcept;

/**
 * @brief The export id field of descriptor bytes that decoded before (a received Publish's), read
 *        without decoding them again, so that the export can be given back when there is no
 *        memory to decode it; nullopt for bytes too short for a descriptor. Never throws.
 */
HOLOSCAN_DLPACK_ABI std::optional<std::uint64_t> descriptor_export_id(const std::uint8_t* bytes,
                                                                      std::size_t size) noexcept;

/**
 * @brief Parses and validates one received frame.
 *
 * `fds` are the descriptors that arrived with it; a Publish that needs one, and a Hello (its
 * sender's pidfd, which the caller still has to check), move fds[0] out, and every other
 * descriptor stays in `fds` for the caller to close.
 */
expected<Message, Error> parse_frame(const std::uint8_t* bytes, std::size_t size, UniqueFd* fds,
                                     std::size_t fd_count);

}  // namespace holoscan::ipc::detail
