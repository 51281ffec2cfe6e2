#include "support/counting_producer.hpp"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <mutex>
#include <utility>

namespace holoscan::test {

struct CountingProducer::State {
  std::atomic<int> deleter_calls{0};
  mutable std::mutex mutex;
  std::thread::id last_deleter_thread;
  std::vector<std::unique_ptr<Record>> unowned;  // tensors made with a null deleter

  void record_deleter_call() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      last_deleter_thread = std::this_thread::get_id();
    }
    deleter_calls.fetch_add(1, std::memory_order_acq_rel);
  }
};

struct CountingProducer::Record {
  std::shared_ptr<State> state;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;
  std::unique_ptr<std::byte[]> data;
  DLManagedTensorVersioned versioned{};
  DLManagedTensor legacy{};
};

namespace {

using Record = CountingProducer::Record;

// Beyond this (or on overflow and nonsense fields) a small buffer is enough: the import must
// reject such a tensor before it touches the data.
constexpr std::size_t kMaxSpanBytes = std::size_t{1} << 26;
constexpr std::size_t kFallbackBytes = 64;

std::size_t span_bytes(const TensorSpec& spec) {
  const std::size_t item_bytes =
      (static_cast<std::size_t>(spec.dtype.bits) * spec.dtype.lanes + 7) / 8;
  if (item_bytes == 0) {
    return kFallbackBytes;
  }
  // Every factor is checked against kMaxSpanBytes first, so no product below can overflow.
  std::uint64_t last_element = 0;
  std::uint64_t elements = 1;
  for (std::size_t i = 0; i < spec.shape.size(); ++i) {
    const std::int64_t extent = spec.shape[i];
    if (extent < 0 || static_cast<std::uint64_t>(extent) > kMaxSpanBytes) {
      return kFallbackBytes;
    }
    if (extent == 0) {
      return 0;
    }
    const std::int64_t stride = spec.strides && i < spec.strides->size() ? (*spec.strides)[i] : 0;
    if (stride < -static_cast<std::int64_t>(kMaxSpanBytes) ||
        stride > static_cast<std::int64_t>(kMaxSpanBytes)) {
      return kFallbackBytes;
    }
    last_element += static_cast<std::uint64_t>(extent - 1) *
                    static_cast<std::uint64_t>(stride < 0 ? -stride : stride);
    elements *= static_cast<std::uint64_t>(extent);
    if (elements > kMaxSpanBytes || last_element > kMaxSpanBytes) {
      return kFallbackBytes;
    }
  }
  const std::uint64_t count = spec.strides ? last_element + 1 : elements;
  return static_cast<std::size_t>(count) * item_bytes;
}

void fill_tensor(Record& record, const TensorSpec& spec, DLTensor& dl) {
  record.shape = spec.shape;
  if (spec.strides) {
    record.strides = *spec.strides;
  }
  if (!spec.null_data) {
    const std::size_t bytes = std::max<std::size_t>(1, spec.byte_offset + span_bytes(spec));
    record.data.reset(new std::byte[bytes]());
  }
  dl.data = record.data.get();
  dl.device = spec.device;
  dl.ndim = spec.ndim.value_or(static_cast<std::int32_t>(spec.shape.size()));
  dl.dtype = spec.dtype;
  dl.shape = spec.null_shape ? nullptr : record.shape.data();
  dl.strides = spec.strides ? record.strides.data() : nullptr;
  dl.byte_offset = spec.byte_offset;
}

void delete_versioned(DLManagedTensorVersioned* self) {
  auto* record = static_cast<Record*>(self->manager_ctx);
  std::shared_ptr<CountingProducer::State> state = std::move(record->state);
  delete record;
  state->record_deleter_call();
}

void delete_legacy(DLManagedTensor* self) {
  auto* record = static_cast<Record*>(self->manager_ctx);
  std::shared_ptr<CountingProducer::State> state = std::move(record->state);
  delete record;
  state->record_deleter_call();
}

}  // namespace

CountingProducer::CountingProducer() : state_(std::make_shared<State>()) {}

CountingProducer::~CountingProducer() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->unowned.clear();
}

DLManagedTensorVersioned* CountingProducer::make_versioned(const TensorSpec& spec) {
  auto record = std::make_unique<Record>();
  fill_tensor(*record, spec, record->versioned.dl_tensor);
  DLManagedTensorVersioned* managed = &record->versioned;
  managed->version = spec.version;
  managed->flags = spec.flags;
  managed->manager_ctx = record.get();
  if (spec.null_deleter) {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->unowned.push_back(std::move(record));
  } else {
    managed->deleter = delete_versioned;
    record->state = state_;
    record.release();
  }
  return managed;
}

DLManagedTensor* CountingProducer::make_legacy(const TensorSpec& spec) {
  auto record = std::make_unique<Record>();
  fill_tensor(*record, spec, record->legacy.dl_tensor);
  DLManagedTensor* managed = &record->legacy;
  managed->manager_ctx = record.get();
  if (spec.null_deleter) {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->unowned.push_back(std::move(record));
  } else {
    managed->deleter = delete_legacy;
    record->state = state_;
    record.release();
  }
  return managed;
}

int CountingProducer::deleter_calls() const noexcept {
  return state_->deleter_calls.load(std::memory_order_acquire);
}

std::thread::id CountingProducer::last_deleter_thread() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->last_deleter_thread;
}

}  // namespace holoscan::test
