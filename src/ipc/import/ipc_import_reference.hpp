#pragma once
// The memory reference of an imported tensor: readiness through the exporter's interprocess
// event, deallocation points as for any tensor, and, when the last owner goes, a Release to the
// exporter ordered after every deallocation point on the GPU.
#include <sys/types.h>

#include <cstdint>
#include <memory>

#include "holoscan/export.hpp"
#include "holoscan/stream_tracked_reference.hpp"
#include "ipc/cuda/ipc_opened_event.hpp"
#include "ipc/import/ipc_importer_core.hpp"
#include "ipc/import/ipc_mapping.hpp"

namespace holoscan::ipc::detail {

/** @brief Owner of one import; Holoscan-owned, read-only memory of another process. */
class HOLOSCAN_DLPACK_ABI ImportedReference final : public StreamTrackedReference {
 public:
  /** @brief Holds the mapping and the readiness event (null: none) of export `export_id`. */
  ImportedReference(std::shared_ptr<ImporterCore> core, std::shared_ptr<ImportedMapping> mapping,
                    std::shared_ptr<holoscan::detail::OpenedEvent> readiness,
                    std::uint64_t export_id, int device) noexcept;
  /**
   * @brief Gives the export back: the release stream waits on every deallocation point and
   *        records the release event that goes with the Release; the mapping is let go once the
   *        points complete. Never blocks.
   */
  ~ImportedReference() override;
  ImportedReference(const ImportedReference&) = delete;
  ImportedReference& operator=(const ImportedReference&) = delete;

  /** @brief Always false: the exporter's readiness is fixed, and streams are process-local. */
  bool set_readiness_stream(cudaStream_t /*stream*/) override { return false; }
  /** @brief True when the exporter sent a readiness event. */
  bool has_readiness_stream_contract() const noexcept override { return readiness_ != nullptr; }
  /** @brief Always null: the producer's stream belongs to another process. */
  cudaStream_t readiness_stream() const noexcept override { return nullptr; }
  /** @brief One cudaStreamWaitEvent on the exporter's event; no-op without one, or once the
   *         Importer saw it complete. */
  expected<void, Error> synchronize_for_consumer(cudaStream_t consumer_stream) override;
  /** @brief Blocks until the exporter's event completed; no-op without one, or once the
   *         Importer saw it complete. */
  expected<void, Error> synchronize_for_host() override;

  /**
   * @brief Whether the exporter's readiness event has completed (asked without waiting; true
   *        without one); once it has, the contract counts as met: synchronize_for_consumer makes
   *        no stream wait and synchronize_for_host returns at once. kFailure naming
   *        cudaEventQuery when the event cannot be asked. Only while no other thread can reach
   *        this reference (the Importer holds the import back until then: ReadinessWait::kOnHost).
   */
  expected<bool, Error> readiness_passed() noexcept;

 private:
  std::shared_ptr<ImporterCore> core_;
  std::shared_ptr<ImportedMapping> mapping_;
  std::shared_ptr<holoscan::detail::OpenedEvent> readiness_;
  std::uint64_t export_id_;
  int device_;
  bool readiness_met_ = false;  // set before the import is handed out, read-only after
  pid_t maker_;  // the process that imported it: a forked child's copy calls no CUDA
};

}  // namespace holoscan::ipc::detail
