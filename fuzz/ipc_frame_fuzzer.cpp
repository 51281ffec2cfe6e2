// libFuzzer target for the channel's frames (protocol version 4): bytes from another process must
// never crash parse_frame(), every refusal must be kInvalidArgument with a message (kIncompatible
// for a Hello of another protocol version, and only for that), whatever parses must re-encode to
// the very same bytes (frames are canonical), a Publish must hold an fd exactly when one of those
// that came was taken, and what a refused Publish names for its importer's mappings must agree
// with what the frame parses to. The first byte is the number of descriptors that came with the
// frame (0..4, as the channel receives at most 4).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <variant>

#include "holoscan/ipc/descriptor.hpp"
#include "ipc/wire/ipc_frame.hpp"

namespace {

using holoscan::ErrorCode;
namespace ipc = holoscan::ipc;

template <class Message>
void check_reencodes(const Message& message, const std::uint8_t* bytes, std::size_t size) {
  auto frame = ipc::detail::encode_frame(message);
  if (!frame || frame->size != size || !std::equal(bytes, bytes + size, frame->bytes.begin())) {
    __builtin_trap();
  }
}

void check_publish(const ipc::Publish& publish, const std::uint8_t* bytes, std::size_t size) {
  auto descriptor = ipc::decode(publish.descriptor.data(), publish.descriptor.size());
  if (!descriptor || ipc::detail::publish_export_id(bytes, size) != descriptor->export_id) {
    __builtin_trap();
  }
  const auto named = ipc::detail::publish_allocations(bytes, size);
  const bool fd_kind = descriptor->handle_kind == ipc::MemoryHandleKind::kPosixFd;
  if (named.forget != publish.forget_allocation ||
      named.fd_allocation != (fd_kind ? descriptor->allocation_id : 0) ||
      (publish.fd.valid() && !fd_kind) ||
      (!publish.fd.valid() && fd_kind && descriptor->allocation_id == 0)) {
    __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) {
    return 0;
  }
  const std::size_t fd_count = std::min<std::size_t>(data[0], 4);
  const std::uint8_t* bytes = data + 1;
  const std::size_t frame_size = size - 1;
  if (frame_size > ipc::detail::kMaxFrameBytes) {
    return 0;  // the channel refuses it before parsing (MSG_TRUNC)
  }
  std::array<ipc::UniqueFd, 4> fds;
  for (std::size_t i = 0; i < fd_count; ++i) {
    fds[i] = ipc::UniqueFd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  }
  auto message = ipc::detail::parse_frame(bytes, frame_size, fds.data(), fd_count);
  if (!message) {
    // kIncompatible is a Hello of another protocol version, and only that.
    const ErrorCode code = message.error().code;
    const bool another_version =
        message.error().message.find("peer speaks protocol version") != std::string::npos;
    if ((code != ErrorCode::kInvalidArgument && code != ErrorCode::kIncompatible) ||
        (code == ErrorCode::kIncompatible) != another_version || message.error().message.empty()) {
      __builtin_trap();
    }
    return 0;
  }
  if (const auto* publish = std::get_if<ipc::Publish>(&*message)) {
    check_publish(*publish, bytes, frame_size);
    check_reencodes(*publish, bytes, frame_size);
  } else if (const auto* release = std::get_if<ipc::Release>(&*message)) {
    check_reencodes(*release, bytes, frame_size);
  } else {
    check_reencodes(std::get<ipc::Hello>(*message), bytes, frame_size);
  }
  return 0;
}
