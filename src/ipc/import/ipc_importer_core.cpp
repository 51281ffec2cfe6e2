#include "ipc/import/ipc_importer_core.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>
#include <variant>

#include "cuda/cuda_error.hpp"
#include "ipc/cuda/cuda_driver_error.hpp"
#include "ipc/cuda/cuda_ipc_api.hpp"
#include "ipc/ipc_error.hpp"
#include "ipc/wire/ipc_frame.hpp"

namespace holoscan::ipc::detail {
namespace {

// As nvidia-smi prints it: GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx.
std::string uuid_text(const std::array<std::uint8_t, 16>& uuid) {
  std::string text = "GPU-";
  char byte[3];
  for (std::size_t i = 0; i < uuid.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) {
      text += '-';
    }
    std::snprintf(byte, sizeof(byte), "%02x", uuid[i]);
    text += byte;
  }
  return text;
}

Error invalid(const std::string& why) { return invalid_argument("ipc import", why); }

}  // namespace

expected<std::optional<Message>, Error> ImporterCore::receive_now() {
  Outbox::Received received = outbox_->receive_now();
  if (received.refused_export) {
    // A publish the channel refused (its descriptors went wrong) is given back at once too, and
    // what it said of the mappings holds as for any other, unless it repeats an export seen.
    refuse_unread(*received.refused_export, received.refused_fd_allocation,
                  received.refused_forget);
  }
  return std::move(received.message);
}

void ImporterCore::imported() noexcept {
  std::lock_guard<std::mutex> lock(books_mutex_);
  ++stats_.imported;
}

void ImporterCore::held_for_readiness() noexcept {
  std::lock_guard<std::mutex> lock(books_mutex_);
  ++stats_.held_for_readiness;
}

bool ImporterCore::promise_release() noexcept {
  // Out of memory, the Release is sent without promised room when it comes (see Outbox::send).
  return outbox_->promise().has_value();
}

expected<void, Error> ImporterCore::find_devices_locked() {
  int count = 0;
  if (cudaError_t status = holoscan::detail::cuda_ipc().get_device_count(&count);
      status != cudaSuccess) {
    return make_unexpected(holoscan::detail::cuda_error(status, "cudaGetDeviceCount"));
  }
  std::vector<std::pair<std::array<std::uint8_t, 16>, int>> devices;
  for (int device = 0; device < count; ++device) {
    CUuuid uuid{};
    if (auto status = holoscan::detail::check_driver(
            holoscan::detail::cuda_ipc().device_get_uuid(&uuid, device), "cuDeviceGetUuid");
        !status) {
      return status;
    }
    std::array<std::uint8_t, 16> bytes{};
    std::memcpy(bytes.data(), &uuid, bytes.size());
    devices.emplace_back(bytes, device);
  }
  devices_ = std::move(devices);
  return {};
}

expected<int, Error> ImporterCore::device_of(const std::array<std::uint8_t, 16>& uuid) {
  std::lock_guard<std::mutex> lock(cuda_mutex_);
  if (!devices_) {
    if (auto found = find_devices_locked(); !found) {
      return make_unexpected(std::move(found.error()));
    }
  }
  for (const auto& [known, device] : *devices_) {
    if (known == uuid) {
      return device;
    }
  }
  return make_unexpected(ErrorCode::kNotFound, "ipc import: the exporter's device " +
                                                   uuid_text(uuid) + " is not one of the " +
                                                   std::to_string(devices_->size()) +
                                                   " CUDA devices this process sees");
}

expected<std::shared_ptr<ImportedMapping>, Error> ImporterCore::mapping(
    const TensorDescriptor& descriptor, UniqueFd fd, int device, bool from_channel) {
  const bool fd_received = fd.valid();
  std::uint64_t opened = 0;
  expected<std::shared_ptr<ImportedMapping>, Error> mapped;
  {
    std::lock_guard<std::mutex> lock(cuda_mutex_);
    const std::uint64_t before = mappings_.opened();
    mapped = mappings_.get(descriptor, std::move(fd), device, from_channel);
    opened = mappings_.opened() - before;
  }
  std::lock_guard<std::mutex> lock(books_mutex_);
  stats_.fds_received += fd_received ? 1 : 0;
  stats_.mappings_opened += opened;
  return mapped;
}

expected<std::shared_ptr<holoscan::detail::OpenedEvent>, Error> ImporterCore::readiness_event(
    const holoscan::detail::IpcHandleBytes& handle, int device) {
  std::lock_guard<std::mutex> lock(cuda_mutex_);
  return readiness_events_.open(handle, device);
}

Error ImporterCore::not_admitted(Admissions::Verdict verdict, bool foreign,
                                 const TensorDescriptor& descriptor) const noexcept {
  try {
    const std::string id = std::to_string(descriptor.export_id);
    if (verdict == Admissions::Verdict::kNoExport) {
      return invalid("export id 0 names no export (exporters number them from 1)");
    }
    if (foreign) {
      return invalid(
          "export " + id + " names exporter process " + std::to_string(descriptor.exporter_pid) +
          ", not this connection's exporter (process " + std::to_string(exporter_pid_) + ")");
    }
    if (verdict == Admissions::Verdict::kHeld) {
      return invalid("export " + id +
                     " is imported here already (one import per export: the first one's Release "
                     "would end the exporter's claim under the second)");
    }
    if (verdict == Admissions::Verdict::kFinishedAhead) {
      return invalid("export " + id +
                     " was given back or refused here before this connection's exporter "
                     "published it (an import_tensor of it): refused, and given back again");
    }
    return invalid("export " + id +
                   " is not held here: it was given back or refused already, or came out of "
                   "publish order");
  } catch (const std::bad_alloc&) {
    return out_of_memory("ipc import");
  }
}

expected<void, Error> ImporterCore::admit(const TensorDescriptor& descriptor, bool promised,
                                          bool from_channel) {
  const std::uint64_t id = descriptor.export_id;
  const bool foreign = id != 0 && descriptor.exporter_pid != exporter_pid_;
  Admissions::Verdict verdict = Admissions::Verdict::kSeen;
  {
    std::lock_guard<std::mutex> lock(books_mutex_);
    verdict = admissions_.verdict(id);
    if (from_channel) {
      admissions_.carried(id);  // after the verdict: the channel's order says nothing of this id
    }
    if (verdict == Admissions::Verdict::kNew && !foreign) {
      try {
        admissions_.hold(id);
        return {};
      } catch (const std::bad_alloc&) {
        // Given back below, outside the lock, as any other refusal of this connection's export.
      }
    }
  }
  const std::uint64_t fd_allocation =
      descriptor.handle_kind == MemoryHandleKind::kPosixFd ? descriptor.allocation_id : 0;
  if (verdict == Admissions::Verdict::kNew && !foreign) {
    refuse(id, fd_allocation, from_channel);
    return make_unexpected(out_of_memory("ipc import"));
  }
  if (verdict == Admissions::Verdict::kFinishedAhead && from_channel && !foreign) {
    give_back_finished_ahead(id);
    return make_unexpected(not_admitted(verdict, foreign, descriptor));
  }
  refused();
  if (promised) {
    outbox_->withdraw_promise();  // no Release follows
  }
  // A caller's import of one finished ahead gives nothing back again: it reads as any seen one.
  return make_unexpected(not_admitted(
      verdict == Admissions::Verdict::kFinishedAhead ? Admissions::Verdict::kSeen : verdict,
      foreign, descriptor));
}

void ImporterCore::refuse_unread(std::uint64_t export_id, std::uint64_t fd_allocation,
                                 std::uint64_t forget_allocation) noexcept {
  Admissions::Verdict verdict = Admissions::Verdict::kSeen;
  {
    std::lock_guard<std::mutex> lock(books_mutex_);
    verdict = admissions_.verdict(export_id);
    admissions_.carried(export_id);
  }
  forget(forget_allocation);  // the exporter forgot it when it sent the Publish, whatever it was
  if (verdict == Admissions::Verdict::kNew) {
    refuse(export_id, fd_allocation, true);
    return;
  }
  if (verdict == Admissions::Verdict::kFinishedAhead) {
    give_back_finished_ahead(export_id);
    return;
  }
  // A repeat of an export held here or given back already: a Release would end another
  // import's claim. Its mapping stays (the exporter counts no refusal); its room is given up.
  refused();
  outbox_->withdraw_promise();
}

void ImporterCore::refused() noexcept {
  std::lock_guard<std::mutex> lock(books_mutex_);
  ++stats_.refused;
}

void ImporterCore::refuse(std::uint64_t export_id, std::uint64_t fd_allocation,
                          bool from_channel) noexcept {
  refused();
  forget(fd_allocation, from_channel);
  give_back(export_id, nullptr, false);
}

// The first Release may have reached the exporter before it held the export (a caller's id ahead
// of its own), which then ignored it: this one ends the claim; an exporter whose claim the first
// one ended ignores it. Either way the exporter goes on counting the allocation's fd as sent, as
// this side keeps its mapping.
void ImporterCore::give_back_finished_ahead(std::uint64_t export_id) noexcept {
  refused();
  give_back(export_id, nullptr, true);
}

void ImporterCore::forget(std::uint64_t allocation, bool channels_too) noexcept {
  if (allocation == 0) {
    return;
  }
  std::shared_ptr<ImportedMapping> dropped;
  {
    std::lock_guard<std::mutex> lock(cuda_mutex_);
    dropped = mappings_.forget(allocation, channels_too);
  }
  // Unmapped here, outside the lock, unless an import still holds it.
}

void ImporterCore::give_back(std::uint64_t export_id, const holoscan::detail::IpcHandleBytes* event,
                             bool was_imported) noexcept {
  if (::getpid() != owner_) {
    // A forked child's copy of an import (or of a refusal): the parent still holds the import,
    // and a Release from here would let the exporter reuse the memory under the parent's reads.
    return;
  }
  Release release;
  release.export_id = export_id;
  release.refused = !was_imported;  // the exporter then sends the allocation's fd again
  if (event != nullptr) {
    release.has_event = true;
    release.event = *event;
  }
  {
    std::lock_guard<std::mutex> lock(books_mutex_);
    admissions_.finish(export_id);  // never imported again, whether imported or refused
    ++stats_.released;
    stats_.release_events += event != nullptr ? 1 : 0;
  }
  outbox_->send(release);
}

void ImporterCore::forget_unused() noexcept {
  MappingCache mappings;
  holoscan::detail::OpenedEventCache events;
  {
    std::lock_guard<std::mutex> lock(cuda_mutex_);
    std::swap(mappings, mappings_);
    std::swap(events, readiness_events_);
  }
  // Unmapped here, outside the lock; imports still hold what they use.
}

void ImporterCore::give_back_unread(const Publish& publish) noexcept {
  const std::uint8_t* bytes = publish.descriptor.data();
  const std::size_t size = publish.descriptor.size();
  if (auto id = descriptor_export_id(bytes, size)) {
    refuse_unread(*id, descriptor_fd_allocation(bytes, size), publish.forget_allocation);
  } else {
    outbox_->withdraw_promise();  // the channel checked it: not reached
  }
}

// Shut first (the callers' first step): a receive() asleep in poll() wakes to end-of-file, and no
// Publish can slip in behind the last one read (an unread Publish would hold its exporter's claim,
// and its pool block, until this process exits).
bool ImporterCore::end_calls_and_shut_receiving() noexcept {
  calls_.end();
  if (::getpid() != owner_) {
    return false;  // a forked child's copy: the socket, and what is queued in it, stay the parent's
  }
  (void)::shutdown(fd(), SHUT_RD);
  return true;
}

void ImporterCore::stop() noexcept {
  stopped_ = true;
  (void)end_calls_and_shut_receiving();
}

void ImporterCore::stop_receiving() noexcept {
  if (!end_calls_and_shut_receiving()) {
    return;
  }
  calls_.wait();  // short now: each call returns as it next looks (ending()), reading nothing more
  try {
    for (;;) {
      auto received = receive_now();  // a Publish the channel refused is given back in there
      if (!received) {
        const ErrorCode code = received.error().code;
        if (code == ErrorCode::kInvalidArgument || code == ErrorCode::kIncompatible ||
            code == ErrorCode::kPermissionDenied) {
          continue;  // a malformed frame, consumed: the next one may be a Publish
        }
        break;  // the end of what was queued (end-of-file after the shutdown), or out of memory
      }
      if (!*received) {
        break;
      }
      const auto* publish = std::get_if<Publish>(&**received);
      if (publish == nullptr) {
        refused();  // an exporter sends nothing but Publish after its Hello
        continue;
      }
      give_back_unread(*publish);
    }
  } catch (...) {
    // Out of memory in the channel's read: what is left unread waits for this process's exit,
    // as it did before it was read.
  }
  forget_unused();
}

expected<void, Error> ImporterCore::flush() { return outbox_->flush(); }

std::size_t ImporterCore::outstanding() const noexcept {
  std::lock_guard<std::mutex> lock(books_mutex_);
  return admissions_.held();
}

std::size_t ImporterCore::queued_releases() const noexcept { return outbox_->queued(); }

std::size_t ImporterCore::cached_mappings() const noexcept {
  std::lock_guard<std::mutex> lock(cuda_mutex_);
  return mappings_.size();
}

ImporterStats ImporterCore::stats() const noexcept {
  std::lock_guard<std::mutex> lock(books_mutex_);
  return stats_;
}

}  // namespace holoscan::ipc::detail
