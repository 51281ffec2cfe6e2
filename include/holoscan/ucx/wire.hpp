#pragma once
/**
 * @file
 * @brief The messages that holoscan::ucx workers exchange (UCX active messages), as plain fields
 *        and as versioned little-endian bytes.
 *
 * A tensor travels as one active message: a TensorHeader (the AM header) and the payload (the AM
 * data, the tensor's bytes in compact row-major order). The receiver answers every tensor with an
 * Ack once receive() handed it out (one Ack may confirm a run of consecutive sequence numbers),
 * or at once when it refused it. A confirmation due when a tensor goes out to that same peer
 * rides in the tensor's header instead of an Ack of its own. A connecting worker sends Hello and waits for the listener's
 * Hello. The bytes come from another host, so every decode trusts none of them.
 */
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include <dlpack/dlpack.h>

#include "holoscan/expected.hpp"
#include "holoscan/export.hpp"

namespace holoscan::ucx {

/** @brief The message format this build writes and reads (every message carries it). Version 2
 *         added the count of an Ack, version 3 the confirmations a tensor header carries; a peer
 *         of another version is refused at connect(). */
inline constexpr std::uint32_t kWireVersion = 3;

/** @brief First four bytes of every message: "HDLU" in memory order. */
inline constexpr std::uint32_t kWireMagic = 0x554c4448;

/** @brief Active message ids of the protocol, registered on every worker. */
enum class MessageId : unsigned {
  kTensor = 1,  ///< TensorHeader as the AM header, the payload as the AM data.
  kAck = 2,     ///< Ack as the AM header, no data.
  kHello = 3,   ///< Hello as the AM header, no data.
};

/** @brief Most dimensions a tensor message carries (part of the format). */
inline constexpr std::size_t kMaxWireDims = 32;

/** @brief Bytes of an encoded TensorHeader with no dimensions. */
inline constexpr std::size_t kTensorHeaderFixedBytes = 72;

/** @brief Bytes of the largest encoded TensorHeader (kMaxWireDims dimensions). */
inline constexpr std::size_t kMaxTensorHeaderBytes =
    kTensorHeaderFixedBytes + 2 * sizeof(std::int64_t) * kMaxWireDims;

/** @brief What a tensor message says about its payload. */
struct HOLOSCAN_DLPACK_API TensorHeader {
  std::uint64_t sequence = 0;       ///< Per sender and peer, from 1: the Ack names it.
  /** @brief The first of the header's receiver's own sequence numbers that this message confirms
   *         as delivered (0 with answered_count 0: none). */
  std::uint64_t answered_sequence = 0;
  std::uint64_t answered_count = 0;  ///< How many consecutive ones it confirms (0: none).
  std::uint64_t payload_bytes = 0;  ///< Bytes of the AM data: the compact payload of the layout.
  std::uint64_t dlpack_flags = 0;   ///< DLPACK_FLAG_BITMASK_* bits of the sender's tensor.
  DLPackVersion dlpack_version{};   ///< DLPack version of the sender's tensor.
  DLDataType dtype{};               ///< Element type.
  std::int32_t ndim = 0;            ///< Dimensions used in `shape` and `strides`.
  std::array<std::int64_t, kMaxWireDims> shape{};    ///< Extents.
  std::array<std::int64_t, kMaxWireDims> strides{};  ///< In elements: compact row-major.
};

/** @brief Bytes encode() writes for `header` (its ndim clamped to the format's range). */
HOLOSCAN_DLPACK_API std::size_t encoded_size(const TensorHeader& header) noexcept;

/**
 * @brief Checks every field with the rules of a DLPack import (ndim, shape, dtype, flags, DLPack
 *        major version, sizes in int64) plus this format's own: strides compact row-major for
 *        every dimension longer than 1 (a tensor of no elements addresses nothing: any strides),
 *        payload_bytes equal to the layout's bytes. kInvalidArgument naming the field;
 *        kNotImplemented for IS_SUBBYTE_TYPE_PADDED, which does not travel yet; kProtocolError
 *        for sequence 0 (numbers start at 1) and for an answered run that is not one (a sequence
 *        without a count, or past the last). encode() refuses what this refuses.
 */
HOLOSCAN_DLPACK_API expected<void, Error> validate(const TensorHeader& header);

/** @brief Writes a valid header into `out` (at least encoded_size() bytes); returns the size. */
HOLOSCAN_DLPACK_API expected<std::size_t, Error> encode(const TensorHeader& header,
                                                        std::uint8_t* out, std::size_t capacity);

/**
 * @brief Parses and validates a tensor message's header bytes. Framing defects (magic, length,
 *        reserved bytes) are kProtocolError, another format version kIncompatible, the fields
 *        as validate(); every message names the field.
 */
HOLOSCAN_DLPACK_API expected<TensorHeader, Error> decode_tensor_header(const std::uint8_t* bytes,
                                                                       std::size_t size);

/** @brief A run of delivered sequence numbers that a message confirms. */
struct HOLOSCAN_DLPACK_API AnsweredRun {
  std::uint64_t sequence = 0;  ///< The first sequence number confirmed.
  std::uint64_t count = 0;     ///< How many consecutive ones (0: none).
};

/**
 * @brief The confirmations a tensor header carries when its framing (magic, version, lengths)
 *        and the run itself are sound, whatever its tensor fields say: a tensor refused for its
 *        layout still answers the sends it confirms. Count 0 otherwise.
 */
HOLOSCAN_DLPACK_API AnsweredRun peek_answered(const std::uint8_t* bytes, std::size_t size) noexcept;

/**
 * @brief Writes `run` into an encoded tensor header (`size` bytes, from encode()) in place: a
 *        confirmation that became due after the header was made rides with it. False when the
 *        bytes are not an encoded header of this version or the run is not one decode accepts.
 */
HOLOSCAN_DLPACK_API bool write_answered(std::uint8_t* bytes, std::size_t size,
                                        AnsweredRun run) noexcept;

/** @brief The sequence number of a tensor header too broken to decode, or 0 when unreadable. */
HOLOSCAN_DLPACK_API std::uint64_t peek_sequence(const std::uint8_t* bytes,
                                                std::size_t size) noexcept;

/** @brief Longest error text an Ack carries; longer texts are cut. */
inline constexpr std::size_t kMaxAckTextBytes = 1024;

/** @brief Bytes of an encoded Ack without text. */
inline constexpr std::size_t kAckFixedBytes = 32;

/**
 * @brief The receiver's answer to tensor messages: `count` consecutive sequence numbers from
 *        `sequence` delivered, or one refused and why.
 */
struct HOLOSCAN_DLPACK_API Ack {
  std::uint64_t sequence = 0;               ///< The first TensorHeader::sequence answered.
  ErrorCode code = ErrorCode::kSuccess;     ///< kSuccess: receive() handed the tensors out.
  std::string message;                      ///< Why it was refused (empty when delivered).
  std::uint64_t count = 1;                  ///< Sequences answered; 1 for a refusal.
};

/** @brief The wire bytes of `ack` (the text cut to kMaxAckTextBytes). */
HOLOSCAN_DLPACK_API std::string encode(const Ack& ack);

/**
 * @brief Parses an Ack; kProtocolError naming the field on any defect (a count of 0, a refusal
 *        answering more than one tensor, a run past the largest sequence number).
 */
HOLOSCAN_DLPACK_API expected<Ack, Error> decode_ack(const std::uint8_t* bytes, std::size_t size);

/** @brief Bytes of an encoded Hello. */
inline constexpr std::size_t kHelloBytes = 16;

/** @brief Sent by a connecting worker, and answered by the listener with its own. */
struct HOLOSCAN_DLPACK_API Hello {
  std::uint32_t version = kWireVersion;  ///< The sender's wire format version.
};

/** @brief The wire bytes of `hello`. */
HOLOSCAN_DLPACK_API std::array<std::uint8_t, kHelloBytes> encode(const Hello& hello) noexcept;

/**
 * @brief Parses a Hello of any version (the caller compares it; another version's may be
 *        longer); kProtocolError on defects.
 */
HOLOSCAN_DLPACK_API expected<Hello, Error> decode_hello(const std::uint8_t* bytes,
                                                        std::size_t size);

}  // namespace holoscan::ucx
