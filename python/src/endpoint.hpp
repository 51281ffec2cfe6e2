#pragma once
// What the endpoints of a transport (ipc, ucx) share in Python: a closable handle on a shared C++
// object, the tensors they send, waits cut into slices so that Ctrl-C interrupts them, and the
// close()/with-block methods.
#include <nanobind/nanobind.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <thread>
#include <type_traits>
#include <utility>

#include <holoscan/cuda_handles.hpp>
#include <holoscan/expected.hpp>
#include <holoscan/tensor.hpp>

#include "bindings.hpp"
#include "errors.hpp"
#include "without_gil.hpp"

namespace holoscan::python {

/** @brief Raises ClosedError "`who`: closed" (an endpoint used after close()). */
[[noreturn]] void raise_closed(const char* who);

/** @brief The value, or the exception of the error's code. */
template <typename T>
T value_or_raise(expected<T, Error> result) {
  if (!result) {
    raise_error(result.error());
  }
  return std::move(*result);
}

/** @brief Whether `T` has a stop() that close() calls (a Listener): see SharedHandle::close(). */
template <typename T, typename = void>
struct StopsAtClose : std::false_type {};
/** @brief See above. */
template <typename T>
struct StopsAtClose<T, std::void_t<decltype(std::declval<T&>().stop())>> : std::true_type {};

/** @brief Whether `T` is an expected<> (a call's answer that may be kClosed). */
template <typename T>
struct IsExpected : std::false_type {};
/** @brief See above. */
template <typename Value>
struct IsExpected<expected<Value, Error>> : std::true_type {};

/** @brief Whether `T` is a std::optional<> (a wait's answer that may be "nothing came"). */
template <typename T>
struct IsOptional : std::false_type {};
/** @brief See above. */
template <typename Value>
struct IsOptional<std::optional<Value>> : std::true_type {};

/** @brief Whether `result` is what a call that stop() ended returns: kClosed, or nothing. */
template <typename Result>
bool stopped_answer(const Result& result) noexcept {
  if constexpr (IsExpected<Result>::value) {
    if (!result) {
      return result.error().code == ErrorCode::kClosed;
    }
    if constexpr (IsOptional<typename Result::value_type>::value) {
      return !result->has_value();
    } else {
      return false;
    }
  } else if constexpr (IsOptional<Result>::value) {
    return !result.has_value();
  } else {
    return false;
  }
}

/**
 * @brief A handle on an endpoint that close() lets go of. A blocking call holds the object for
 *        as long as it runs (Held), so that close() from another thread cannot free it under the
 *        call; close() then only stops it, and the last call to let go of it destroys it.
 */
template <typename T>
class SharedHandle {
 public:
  /** @brief Holds `object`. */
  explicit SharedHandle(std::shared_ptr<T> object) noexcept : object_(std::move(object)) {}
  /** @brief Shares `other`'s object; the calls that hold `other`'s are not this one's. */
  SharedHandle(const SharedHandle& other) noexcept : object_(other.object_) {}
  /** @brief Takes `other`'s object over (a handle no call holds: nanobind moves new ones). */
  SharedHandle(SharedHandle&& other) noexcept : object_(std::move(other.object_)) {}
  SharedHandle& operator=(const SharedHandle&) = delete;
  SharedHandle& operator=(SharedHandle&&) = delete;
  /** @brief Lets go as close() does, without stopping the object: a handle dropped without
   *         close() (its Python object's last reference gone, a collected cycle, a copy) destroys
   *         its object without the GIL too, once no call uses it. */
  ~SharedHandle() { let_go(false); }

  /** @brief The object, or ClosedError naming `who`. */
  std::shared_ptr<T> get(const char* who) const {
    if (object_ == nullptr) {
      raise_closed(who);
    }
    return object_;
  }

  /**
   * @brief A reference to the object that a blocking call holds for as long as it runs, each
   *        slice of a wait included: close() from another thread then only stops the object and
   *        never destroys it itself (a UCX worker's destructor flushes for up to a second). Had
   *        each slice taken its own reference, a close() that fell between two slices would have
   *        been the last user and waited that second out.
   */
  class Held {
   public:
    /** @brief Holds `handle`'s object, or raises ClosedError naming `who`. */
    Held(const SharedHandle& handle, const char* who) : handle_(handle), who_(who) {
      object_ = handle.get(who);
      ++handle_.holders_;
    }
    Held(const Held&) = delete;
    Held& operator=(const Held&) = delete;
    /** @brief Lets go; when close() ran meanwhile this may be the last reference, so it goes
     *         without the GIL, stalling no other Python thread. */
    ~Held() { handle_.let_go_held(object_); }

    /**
     * @brief `call(object)`'s result, called without the GIL (it must touch no Python object), or
     *        ClosedError naming `who` once close() ran: before the call, or during it when the
     *        call ends as close() stopped it (see let_go), the last slice of a wait with a limit
     *        included (it would otherwise say that nothing came).
     */
    template <typename Call>
    auto call(Call&& call) const {
      if (handle_.closed()) {
        raise_closed(who_);
      }
      auto result = without_gil([&] { return call(*object_); });
      if constexpr (StopsAtClose<T>::value) {
        if (handle_.closed() && stopped_answer(result)) {
          raise_closed(who_);
        }
      }
      return result;
    }

   private:
    const SharedHandle& handle_;
    const char* who_;
    std::shared_ptr<T> object_;
  };

  /** @brief The object held for the calls of one blocking method (see Held). */
  Held hold(const char* who) const { return Held(*this, who); }

  /** @brief `call(object)`'s result, called without the GIL, as Held::call() calls it. */
  template <typename Call>
  auto call_without_gil(const char* who, Call&& call) const {
    const Held held(*this, who);
    return held.call(std::forward<Call>(call));
  }

  /** @brief Whether close() ran. */
  bool closed() const noexcept { return object_ == nullptr; }

  /** @brief The object's descriptor, or -1 once closed (as socket.fileno(): selectors then find
   *         a closed object by identity when it is unregistered). */
  int fileno() const noexcept { return object_ == nullptr ? -1 : object_->fd(); }

  /**
   * @brief Lets go of the object; it is destroyed without the GIL once no call uses it, except
   *        while the interpreter finalizes: then with the GIL, so that the Python objects it
   *        lets go (a worker's receive pool, a producer still being sent) are released by this
   *        thread, the one that finalizes, instead of leaked as releases from a thread without
   *        the GIL are once Python is exiting. No other Python thread runs then to be stalled.
   */
  void close() noexcept { let_go(true); }

 private:
  // A call on another thread may keep the object a while (a slice of its wait): close() stops it
  // now all the same, so that nothing more is taken or handed out (a Listener's connects and its
  // path, a Worker's arrivals and accepts, an Importer's publishes) and that call ends at once.
  // Stopping takes the object's own lock, which another thread's call holds without the GIL.
  //
  // Who drops the last reference is decided under the GIL: while a call holds the object
  // (holders_), close() drops its own with the GIL, never the last, and the call's Held drops the
  // last one once it ends. A Held that ends while close() is inside stop() (without the GIL: the
  // stop wakes that very call) first waits for close() to have dropped its reference; otherwise
  // both would drop theirs without the GIL, and close() could be the one left to destroy it.
  void let_go(bool stop) noexcept {
    std::shared_ptr<T> gone = std::move(object_);
    if (gone == nullptr) {
      return;
    }
    if (interpreter_finalizing()) {
      // Only this thread runs Python now: nothing is stalled, and nothing else decides.
      if constexpr (StopsAtClose<T>::value) {
        if (stop) {
          gone->stop();
        }
      }
      gone.reset();
      return;
    }
    if constexpr (StopsAtClose<T>::value) {
      if (stop) {
        stopping_ = true;
        without_gil([&] { gone->stop(); });
        stopping_ = false;
      }
    }
    if (holders_ > 0) {
      gone.reset();  // a call's Held holds one more: not the last
      return;
    }
    without_gil([&] { gone.reset(); });  // a destructor may wait on a socket or a flush
  }

  // A Held's end, under the GIL. A handle not yet closed holds one more reference: that drop is
  // never the last. Once closed it may be (a destructor may flush for a second): without the GIL.
  void let_go_held(std::shared_ptr<T>& reference) const noexcept {
    while (stopping_ && !interpreter_finalizing()) {
      without_gil([] { std::this_thread::sleep_for(std::chrono::milliseconds(1)); });
    }
    --holders_;
    if (object_ != nullptr || interpreter_finalizing()) {
      reference.reset();
      return;
    }
    without_gil([&] { reference.reset(); });
  }

  std::shared_ptr<T> object_;
  // The calls that hold the object now (Held), and whether close() is inside the object's stop();
  // both read and written with the GIL held only (the extension is built for an interpreter with
  // a GIL: a free-threaded build would need them atomic, and the decision on the last reference
  // made under a lock of the handle's own).
  mutable int holders_ = 0;
  bool stopping_ = false;
};

/**
 * @brief A Tensor for an endpoint to send, a handle of our own (another thread may change the
 *        caller's meanwhile): a Tensor as is, anything else imported as as_tensor imports it,
 *        with `stream` as the consumer that waits for its producer (none: the legacy default).
 */
Tensor tensor_argument(nanobind::handle object, const std::optional<cudaStream_t>& stream);

/** @brief A wait of `timeout_ms` (negative: no limit) taken in slices of at most 100 ms. */
class SlicedWait {
 public:
  /** @brief Starts the wait now. */
  explicit SlicedWait(int timeout_ms) noexcept;
  /** @brief How long the next slice may wait, in ms (0 once the time is up). */
  int slice_ms() const noexcept;
  /** @brief Whether the timeout has passed (never for no limit). */
  bool expired() const noexcept;

 private:
  bool unlimited_;
  long long end_ns_;
};

/**
 * @brief `timeout_ms` of a Hello exchange (Importer, add_peer, connect), or InvalidArgumentError
 *        naming `who` and `name` when it is negative: the exchange is one wait without the GIL
 *        that no signal interrupts, so "no limit" would be a wait that only the peer can end.
 *        Past 2**31-1 it is InvalidArgumentError too; a bool or no integer, TypeError.
 */
int hello_timeout(nanobind::handle timeout_ms, const char* who, const char* name);

/**
 * @brief The `timeout_ms` of a sliced wait (receive, accept, connect): None for no limit, else an
 *        int (negative: no limit), named in its refusal as named_integer names it.
 */
std::optional<int> wait_timeout(nanobind::handle timeout_ms, const char* who);

/** @brief A peer id argument of `who` (an Exporter's or a Worker's), refused as named_integer does.
 */
std::uint64_t peer_argument(nanobind::handle peer, const char* who);

/** @brief peer_argument() of a peer that may be None (every peer): nullopt for None. */
std::optional<std::uint64_t> optional_peer_argument(nanobind::handle peer, const char* who);

/** @brief Runs Python's signal handlers; raises what they raise (KeyboardInterrupt, ...). */
void handle_signals();

/**
 * @brief Calls `attempt(slice_ms)` until it gives a valid object (returned) or `timeout_ms` (None:
 *        no limit) has passed (None returned), handling signals between slices.
 */
template <typename Attempt>
nanobind::object wait_in_slices(std::optional<int> timeout_ms, Attempt&& attempt) {
  const SlicedWait wait(timeout_ms ? *timeout_ms : -1);
  for (;;) {
    nanobind::object got = attempt(wait.slice_ms());
    if (got.is_valid()) {
      return got;
    }
    if (wait.expired()) {
      return nanobind::none();
    }
    handle_signals();
  }
}

/**
 * @brief Adds close(), closed, __enter__ (typed by `enter_signature`, a string literal) and
 *        __exit__ (which closes) to an endpoint type.
 */
template <typename Handle>
void def_closable(nanobind::class_<Handle>& type, const char* enter_signature,
                  const char* close_doc) {
  namespace nb = nanobind;
  type.def("close", &Handle::close, Entry(), close_doc)
      .def_prop_ro("closed", &Handle::closed, Entry(),
                   "Whether close() ran (or, for a Channel, an endpoint took it).")
      .def(
          "__enter__", [](nb::handle self) { return nb::borrow(self); }, nb::sig(enter_signature),
          "Returns self.")
      .def(
          "__exit__", [](Handle& self, nb::handle, nb::handle, nb::handle) { self.close(); },
          nb::arg("exc_type").none(), nb::arg("exc_value").none(), nb::arg("traceback").none(),
          Entry(), "Closes, as close() does.");
}

}  // namespace holoscan::python
