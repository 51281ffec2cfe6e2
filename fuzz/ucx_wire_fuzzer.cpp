// libFuzzer target for the UCX messages' decoders: bytes from another host must never crash them,
// every refusal must carry one of the protocol's codes and a message, and whatever decodes must
// re-encode to the very same bytes (the formats are canonical). The first byte picks the decoder.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "holoscan/ucx/wire.hpp"

namespace {

using holoscan::ErrorCode;
namespace ucx = holoscan::ucx;

void check_tensor_header(const std::uint8_t* data, std::size_t size) {
  const std::uint64_t sequence = ucx::peek_sequence(data, size);
  const ucx::AnsweredRun answered = ucx::peek_answered(data, size);
  if ((answered.count == 0 && answered.sequence != 0) ||
      (answered.count != 0 && (answered.sequence == 0 ||
                               answered.count - 1 > UINT64_MAX - answered.sequence))) {
    __builtin_trap();  // a run the sending side would end sends by must be a real one
  }
  auto decoded = ucx::decode_tensor_header(data, size);
  if (!decoded) {
    const ErrorCode code = decoded.error().code;
    if ((code != ErrorCode::kInvalidArgument && code != ErrorCode::kProtocolError &&
         code != ErrorCode::kIncompatible && code != ErrorCode::kNotImplemented) ||
        decoded.error().message.empty()) {
      __builtin_trap();
    }
    return;
  }
  std::vector<std::uint8_t> again(ucx::encoded_size(*decoded));
  auto written = ucx::encode(*decoded, again.data(), again.size());
  if (!written || *written != size || !std::equal(again.begin(), again.end(), data) ||
      decoded->sequence != sequence || decoded->answered_sequence != answered.sequence ||
      decoded->answered_count != answered.count) {
    __builtin_trap();
  }
}

// A run is written only into an encoded header of this version, only where peek_answered reads
// it, and reads back as written; anything else is left as it was.
void check_write_answered(const std::uint8_t* data, std::size_t size) {
  constexpr std::size_t kAnsweredAt = 56;
  const ucx::AnsweredRun run{ucx::peek_sequence(data, size), size % 4};  // sound or not
  std::vector<std::uint8_t> bytes(data, data + size);
  if (!ucx::write_answered(bytes.data(), size, run)) {
    if (!std::equal(bytes.begin(), bytes.end(), data)) {
      __builtin_trap();
    }
    return;
  }
  const ucx::AnsweredRun read = ucx::peek_answered(bytes.data(), size);
  if (read.sequence != run.sequence || read.count != run.count ||
      !std::equal(bytes.begin(), bytes.begin() + kAnsweredAt, data) ||
      !std::equal(bytes.begin() + kAnsweredAt + 16, bytes.end(), data + kAnsweredAt + 16)) {
    __builtin_trap();
  }
}

void check_ack(const std::uint8_t* data, std::size_t size) {
  auto decoded = ucx::decode_ack(data, size);
  if (!decoded) {
    if (decoded.error().code != ErrorCode::kProtocolError || decoded.error().message.empty()) {
      __builtin_trap();
    }
    return;
  }
  const auto again = ucx::encode(*decoded);
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(again.data());  // chars may be signed
  if (again.size() != size || !std::equal(bytes, bytes + again.size(), data)) {
    __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) {
    return 0;
  }
  const std::uint8_t* message = data + 1;
  const std::size_t length = size - 1;
  switch (data[0] % 3) {
    case 0:
      check_tensor_header(message, length);
      check_write_answered(message, length);
      break;
    case 1:
      check_ack(message, length);
      break;
    default:
      if (auto hello = ucx::decode_hello(message, length); hello) {
        // This version's Hello re-encodes to itself; another version's is only read, not checked.
        const auto again = ucx::encode(*hello);
        const std::size_t same = hello->version == ucx::kWireVersion ? again.size() : 8;
        if (length < ucx::kHelloBytes || !std::equal(again.begin(), again.begin() + same, message)) {
          __builtin_trap();
        }
      } else if (hello.error().code != ErrorCode::kProtocolError) {
        __builtin_trap();
      }
  }
  return 0;
}
