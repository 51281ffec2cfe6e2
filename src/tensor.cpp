#include "holoscan/tensor.hpp"

#include <cstdio>
#include <memory>
#include <new>
#include <string>
#include <utility>

#include "dlpack_validate.hpp"
#include "holoscan/dlpack.hpp"

namespace holoscan {
namespace {

// Context and DLPack owner in one allocation: an import costs a single heap allocation.
template <class Buffer, class Managed>
struct ImportedContext final : detail::TensorContext {
  explicit ImportedContext(Managed* managed) : buffer(managed) { memory = &buffer; }
  Buffer buffer;
};

// Runs the producer's deleter on every early return until an owner object holds it.
template <class Managed>
class ProducerGuard {
 public:
  explicit ProducerGuard(Managed* managed) noexcept : managed_(managed) {}
  ~ProducerGuard() {
    if (managed_ != nullptr && managed_->deleter != nullptr) {
      managed_->deleter(managed_);
    }
  }
  ProducerGuard(const ProducerGuard&) = delete;
  ProducerGuard& operator=(const ProducerGuard&) = delete;
  void dismiss() noexcept { managed_ = nullptr; }

 private:
  Managed* managed_;
};

template <class Buffer, class Managed>
expected<Tensor, Error> import_managed(Managed* managed, std::uint64_t flags, DLPackVersion version,
                                       ProducerGuard<Managed>& guard, const char* who) {
  std::shared_ptr<ImportedContext<Buffer, Managed>> context;
  try {
    context = std::make_shared<ImportedContext<Buffer, Managed>>(managed);
  } catch (...) {
    return make_unexpected(ErrorCode::kResourceExhausted,
                           std::string(who) + ": out of host memory");
  }
  // The owner is armed: from here on every failure releases the producer through it, once.
  guard.dismiss();
  if (auto filled = detail::import_dl_tensor(managed->dl_tensor, flags, *context, who); !filled) {
    return tl::unexpected<Error>(std::move(filled.error()));
  }
  context->version = version;
  return Tensor(std::move(context));
}

std::string to_hex(std::uint64_t value) {
  char text[19];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(value));
  return text;
}

const DLTensor kEmptyDLTensor{};

}  // namespace

Tensor::Tensor(std::shared_ptr<detail::TensorContext> context) noexcept
    : context_(std::move(context)) {
  if (context_ != nullptr && context_->memory == nullptr) {
    context_.reset();  // a context without memory cannot honour any hook: the Tensor is empty
  }
  if (context_ != nullptr) {
    context_->memory->retain_tensor_handle();
  }
}

Tensor::Tensor(const Tensor& other) noexcept : context_(other.context_) {
  if (context_ != nullptr && context_->memory != nullptr) {
    context_->memory->retain_tensor_handle();
  }
}

Tensor& Tensor::operator=(const Tensor& other) noexcept {
  if (other.context_ != nullptr && other.context_->memory != nullptr) {
    other.context_->memory->retain_tensor_handle();  // first, so self-assignment stays balanced
  }
  release_claim();
  context_ = other.context_;
  return *this;
}

Tensor& Tensor::operator=(Tensor&& other) noexcept {
  if (this != &other) {
    release_claim();
    context_ = std::move(other.context_);
  }
  return *this;
}

Tensor::~Tensor() { release_claim(); }

void Tensor::release_claim() noexcept {
  if (context_ != nullptr && context_->memory != nullptr) {
    context_->memory->release_tensor_handle();
  }
}

void* Tensor::data() const noexcept {
  if (context_ == nullptr || context_->dl.data == nullptr) {
    return nullptr;
  }
  return static_cast<char*>(context_->dl.data) + context_->dl.byte_offset;
}

DLDevice Tensor::device() const noexcept { return dl_tensor().device; }
DLDataType Tensor::dtype() const noexcept { return dl_tensor().dtype; }
std::int32_t Tensor::ndim() const noexcept { return dl_tensor().ndim; }
std::int64_t Tensor::size() const noexcept { return context_ ? context_->size : 0; }
std::int64_t Tensor::nbytes() const noexcept { return context_ ? context_->nbytes : 0; }
std::uint64_t Tensor::flags() const noexcept { return context_ ? context_->flags : 0; }

std::int64_t Tensor::itemsize() const noexcept {
  const DLDataType type = dtype();
  return (static_cast<std::int64_t>(type.bits) * type.lanes + 7) / 8;
}

bool Tensor::read_only() const noexcept { return (flags() & DLPACK_FLAG_BITMASK_READ_ONLY) != 0; }
bool Tensor::is_copied() const noexcept { return (flags() & DLPACK_FLAG_BITMASK_IS_COPIED) != 0; }

const DLTensor& Tensor::dl_tensor() const noexcept {
  return context_ ? context_->dl : kEmptyDLTensor;
}

std::vector<std::int64_t> Tensor::shape() const {
  const DLTensor& dl = dl_tensor();
  return std::vector<std::int64_t>(dl.shape, dl.shape + dl.ndim);
}

std::vector<std::int64_t> Tensor::strides() const {
  const DLTensor& dl = dl_tensor();
  std::vector<std::int64_t> bytes(static_cast<std::size_t>(dl.ndim));
  const std::int64_t item = itemsize();
  for (std::int32_t i = 0; i < dl.ndim; ++i) {
    bytes[static_cast<std::size_t>(i)] = dl.strides[i] * item;
  }
  return bytes;
}

bool Tensor::is_contiguous() const noexcept {
  const DLTensor& dl = dl_tensor();
  if (size() == 0) {
    return true;
  }
  std::int64_t expected_stride = 1;
  for (std::int32_t i = dl.ndim; i-- > 0;) {
    if (dl.shape[i] != 1 && dl.strides[i] != expected_stride) {
      return false;
    }
    expected_stride *= dl.shape[i];
  }
  return true;
}

std::shared_ptr<TensorMemoryReference> Tensor::memory_reference() const noexcept {
  if (context_ == nullptr) {
    return nullptr;
  }
  return std::shared_ptr<TensorMemoryReference>(context_, context_->memory);
}

bool Tensor::set_readiness_stream(cudaStream_t stream) {
  return context_ != nullptr && context_->memory->set_readiness_stream(stream);
}

bool Tensor::has_readiness_stream_contract() const noexcept {
  return context_ != nullptr && context_->memory->has_readiness_stream_contract();
}

expected<void, Error> Tensor::synchronize_for_consumer(cudaStream_t stream) {
  if (context_ == nullptr) {
    return make_unexpected(ErrorCode::kInvalidArgument,
                           "Tensor::synchronize_for_consumer: the Tensor is empty");
  }
  if (!context_->memory->has_readiness_stream_contract()) {
    return make_unexpected(
        ErrorCode::kNotImplemented,
        "Tensor::synchronize_for_consumer: the memory reference has no readiness "
        "contract (no readiness stream was recorded)");
  }
  return context_->memory->synchronize_for_consumer(stream);
}

expected<void, Error> Tensor::synchronize_for_host() {
  if (context_ == nullptr) {
    return make_unexpected(ErrorCode::kInvalidArgument,
                           "Tensor::synchronize_for_host: the Tensor is empty");
  }
  if (!context_->memory->has_readiness_stream_contract()) {
    return make_unexpected(ErrorCode::kNotImplemented,
                           "Tensor::synchronize_for_host: the memory reference has no readiness "
                           "contract (no readiness stream was recorded)");
  }
  return context_->memory->synchronize_for_host();
}

bool Tensor::set_deallocation_stream(cudaStream_t stream) {
  return context_ != nullptr && context_->memory->set_deallocation_stream(stream);
}

expected<Tensor, Error> make_tensor_from_dlpack_versioned(DLManagedTensorVersioned* managed) {
  constexpr const char* kWho = "make_tensor_from_dlpack_versioned";
  if (managed == nullptr) {
    return make_unexpected(ErrorCode::kInvalidArgument,
                           std::string(kWho) + ": the DLManagedTensorVersioned pointer is null");
  }
  ProducerGuard<DLManagedTensorVersioned> guard(managed);
  // DLPack rule: on another major version only the fields up to `flags` have a known layout, and
  // of those only the deleter may be used.
  const DLPackVersion version = managed->version;
  if (version.major != DLPACK_MAJOR_VERSION) {
    return make_unexpected(ErrorCode::kInvalidArgument,
                           std::string(kWho) + ": version.major " + std::to_string(version.major) +
                               " is not " + std::to_string(DLPACK_MAJOR_VERSION));
  }
  const std::uint64_t unknown = managed->flags & ~detail::known_flag_bits();
  if (unknown != 0) {
    return make_unexpected(ErrorCode::kInvalidArgument,
                           std::string(kWho) + ": flags has unknown bits " + to_hex(unknown));
  }
  return import_managed<DLManagedMemoryBufferVersioned>(managed, managed->flags, version, guard,
                                                        kWho);
}

expected<Tensor, Error> make_tensor_from_dlpack(DLManagedTensor* managed) {
  constexpr const char* kWho = "make_tensor_from_dlpack";
  if (managed == nullptr) {
    return make_unexpected(ErrorCode::kInvalidArgument,
                           std::string(kWho) + ": the DLManagedTensor pointer is null");
  }
  ProducerGuard<DLManagedTensor> guard(managed);
  return import_managed<DLManagedMemoryBuffer>(managed, 0, DLPackVersion{0, 0}, guard, kWho);
}

}  // namespace holoscan
