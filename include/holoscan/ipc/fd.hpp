#pragma once
/**
 * @file
 * @brief An owned POSIX file descriptor: the memory handles and sockets of cross-process tensors.
 */
#include "holoscan/export.hpp"

namespace holoscan::ipc {

/** @brief Owns one file descriptor and closes it once; move-only. */
class HOLOSCAN_DLPACK_API UniqueFd {
 public:
  /** @brief Holds no descriptor. */
  UniqueFd() noexcept = default;
  /** @brief Takes ownership of `fd` (negative: holds none). */
  explicit UniqueFd(int fd) noexcept : fd_(fd < 0 ? -1 : fd) {}
  /** @brief Takes `other`'s descriptor; `other` holds none afterwards. */
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  /** @brief Closes the held descriptor, then takes `other`'s. */
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) {
      reset(other.release());
    }
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  /** @brief Closes the held descriptor. */
  ~UniqueFd() { reset(); }

  /** @brief The held descriptor, or -1; ownership stays here. */
  int get() const noexcept { return fd_; }
  /** @brief Whether a descriptor is held. */
  bool valid() const noexcept { return fd_ >= 0; }
  /** @brief Gives the descriptor up without closing it. */
  int release() noexcept {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  /** @brief Closes the held descriptor (errors ignored: the descriptor is gone either way). */
  void reset(int fd = -1) noexcept;

 private:
  int fd_ = -1;
};

}  // namespace holoscan::ipc
