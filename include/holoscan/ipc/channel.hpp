#pragma once
/**
 * @file
 * @brief A framed message channel between two processes over a Unix-domain SOCK_SEQPACKET socket.
 *
 * SOCK_SEQPACKET keeps message boundaries (one frame per record), passes file descriptors
 * (SCM_RIGHTS) and reports end-of-file once the peer's last descriptor of the socket is closed,
 * which is how an exporter learns that an importer died. Every received frame is validated, and
 * descriptors that arrive where none belong are closed, so a hostile peer cannot leak fds into us.
 */
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "holoscan/expected.hpp"
#include "holoscan/export.hpp"
#include "holoscan/ipc/fd.hpp"
#include "holoscan/ipc/message.hpp"

namespace holoscan::ipc {

namespace detail {
struct Frame;
}  // namespace detail

/** @brief The ErrorCode a channel returns once its peer has hung up (EOF, EPIPE, ECONNRESET). */
inline constexpr ErrorCode kChannelClosed = ErrorCode::kClosed;

class HOLOSCAN_DLPACK_API Listener;

/** @brief One connected end of a message channel; move-only, closes its socket. */
class HOLOSCAN_DLPACK_API Channel {
 public:
  /** @brief Two connected ends, e.g. to hand one to a child process. */
  static expected<std::pair<Channel, Channel>, Error> pair();

  /**
   * @brief Connects to a Listener bound at `path`. While its backlog is full (a listener that does
   *        not accept), waits up to `timeout_ms` (negative: without a limit), then kTimeout.
   */
  static expected<Channel, Error> connect(const std::string& path, int timeout_ms = -1);

  /**
   * @brief Takes a connected AF_UNIX SOCK_SEQPACKET socket (e.g. inherited); refuses others. The
   *        socket is made close-on-exec, as every socket the library opens is.
   */
  static expected<Channel, Error> adopt(UniqueFd socket);

  /** @brief Takes `other`'s socket; `other` is left without one (its send() and receive() fail
   *         with kInvalidArgument, at once). */
  Channel(Channel&& other) noexcept = default;
  /** @brief Closes this socket, then takes `other`'s. */
  Channel& operator=(Channel&& other) noexcept = default;
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;
  /** @brief Closes the socket; the peer then reads end-of-file. */
  ~Channel() = default;

  /** @brief The socket, for poll()/epoll integration (readable: receive() will not wait). */
  int fd() const noexcept { return socket_.get(); }

  /**
   * @brief Sends one message, with a Publish's fd attached (the caller keeps its own).
   *
   * Refuses (kInvalidArgument) what the peer would refuse. Waits up to `timeout_ms` (negative:
   * no limit) for room in the socket; on timeout nothing is sent and the error is kNotReady.
   * Never raises SIGPIPE; a peer that hung up gives kChannelClosed. Never throws: out of memory
   * (checking a Publish's descriptor) is kResourceExhausted, with nothing sent.
   */
  expected<void, Error> send(const Message& message, int timeout_ms = -1);
  /** @brief Sends a Hello; as send(const Message&). */
  expected<void, Error> send(const Hello& hello, int timeout_ms = -1);
  /** @brief Sends a Publish, lending its fd; as send(const Message&). */
  expected<void, Error> send(const Publish& publish, int timeout_ms = -1);
  /** @brief Sends a Release; as send(const Message&). */
  expected<void, Error> send(const Release& release, int timeout_ms = -1);

  /**
   * @brief The next message, or nullopt when none arrived within `timeout_ms` (negative: wait).
   *
   * A frame that fails validation is consumed and reported as kInvalidArgument (the channel stays
   * usable; drop it to cut a misbehaving peer off). Out of memory once a frame is read, it is
   * consumed likewise and reported as kResourceExhausted. Messages the peer sent before it hung up
   * are all delivered before end-of-file, which is kChannelClosed, with closed() true.
   */
  expected<std::optional<Message>, Error> receive(int timeout_ms);

  /**
   * @brief The export id of the Publish that the last receive() refused although its descriptor
   *        decodes (the wrong number of file descriptors, descriptors the kernel could not hand
   *        over, or no memory to take it), so that the caller can give it back; nullopt after any
   *        other receive().
   */
  std::optional<std::uint64_t> refused_export() const noexcept { return refused_export_; }
  /** @brief That refused Publish's allocation id when its handle kind is kPosixFd (0 otherwise):
   *         its importer lets go of that mapping, as its exporter will count it. */
  std::uint64_t refused_fd_allocation() const noexcept { return refused_allocation_; }
  /** @brief That refused Publish's forget_allocation (0 otherwise), which holds all the same. */
  std::uint64_t refused_forget_allocation() const noexcept { return refused_forget_; }

  /**
   * @brief The peer's pid as the kernel recorded it (SO_PEERCRED) when the socket was connected.
   *
   * That is the process that connected or created the socket, not necessarily the one that uses
   * it: for pair() it is the creating process for both ends, even after a fork or when a launcher
   * hands the ends to processes it starts. The Hello proves who actually speaks (Hello::process).
   * kInvalidArgument on a Channel moved from.
   */
  expected<std::int32_t, Error> peer_pid() const;

  /** @brief Whether the peer has been seen to hang up. */
  bool closed() const noexcept { return closed_; }

 private:
  friend class Listener;
  explicit Channel(UniqueFd socket) noexcept : socket_(std::move(socket)) {}
  static expected<Channel, Error> make(UniqueFd socket);
  expected<void, Error> send_frame(const expected<detail::Frame, Error>& frame, int fd,
                                   int timeout_ms, bool credentials = false);
  void note_refused(const std::uint8_t* frame, std::size_t size) noexcept;

  UniqueFd socket_;
  bool closed_ = false;
  std::optional<std::uint64_t> refused_export_;
  std::uint64_t refused_allocation_ = 0;
  std::uint64_t refused_forget_ = 0;
};

/** @brief A bound, listening socket path that accepts Channels; move-only. */
class HOLOSCAN_DLPACK_API Listener {
 public:
  /** @brief Binds and listens at `path`, which must not exist yet (a stale one: unlink it first).
   */
  static expected<Listener, Error> listen(const std::string& path);

  /** @brief Takes `other`'s socket and path; `other` is left without them (its accept() fails
   *         with kInvalidArgument, at once). */
  Listener(Listener&& other) noexcept;
  /** @brief Closes this listener, then takes `other`'s socket and path. */
  Listener& operator=(Listener&& other) noexcept;
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;
  /** @brief Closes the socket and, in the process that bound it, removes the path (only while
   *         the path still names this listener's socket: never a later listener's). */
  ~Listener();

  /**
   * @brief The next connection, or nullopt when none came within `timeout_ms` (negative: wait);
   *        kClosed once stop() was called.
   */
  expected<std::optional<Channel>, Error> accept(int timeout_ms = -1);

  /**
   * @brief Stops listening at once, from any thread, also while another thread waits in
   *        accept() (which then returns kClosed): connects are refused and the path is removed
   *        as the destructor removes it; the socket is closed by the destructor (until then fd()
   *        stays readable, hung up: take it out of a poll set). In a forked child, stops only
   *        the child's copy. Not to be called while another thread destroys or moves this
   *        Listener.
   */
  void stop() noexcept;

  /** @brief The listening socket, for poll()/epoll integration. */
  int fd() const noexcept { return socket_.get(); }

  /** @brief The bound path. */
  const std::string& path() const noexcept { return path_; }

 private:
  Listener(UniqueFd socket, std::string path, std::int32_t owner) noexcept;
  void unbind() noexcept;
  void remove_path_once() noexcept;

  UniqueFd socket_;
  std::string path_;
  std::int32_t owner_ = 0;  // pid that bound the path: a forked child's copy must not remove it
  // The path's file as bound: a path removed and bound again by another listener is not ours.
  std::uint64_t bound_device_ = 0;
  std::uint64_t bound_inode_ = 0;
  std::atomic<bool> stopped_{false};       // stop() was called: accept() is kClosed
  std::atomic<bool> path_removed_{false};  // the path was removed (or given up) once
};

}  // namespace holoscan::ipc
