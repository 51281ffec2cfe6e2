// Fuzzes DLPack import (versioned and legacy), the accessors, copies, both exports and the
// re-import of each export. Invariants are checked inside: the producer's deleter runs exactly
// once (never on a rejection, until the caller runs it), every size, byte count and byte stride
// equals a 128-bit reference computation, and an export reads back as the tensor it came from.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include <holoscan/tensor.hpp>

#include "dlpack/context_access.hpp"
#include "dlpack_input.hpp"

namespace {

using holoscan_fuzz::check;

__extension__ typedef __int128 Wide;

struct Producer {
  int deleter_calls = 0;
  DLManagedTensorVersioned versioned{};
  DLManagedTensor legacy{};
};

// What the producer described, computed in 128 bits.
struct Reference {
  Wide size = 1;
  bool packed = false;
  Wide bits = 0;
};

Reference reference_of(const DLTensor& t, std::uint64_t flags) {
  Reference ref;
  ref.bits = Wide{t.dtype.bits} * t.dtype.lanes;
  ref.packed = ref.bits % 8 != 0 && (flags & (std::uint64_t{1} << 2)) == 0;
  for (std::int32_t i = 0; i < t.ndim; ++i) {
    ref.size *= t.shape[i];
  }
  return ref;
}

// Holoscan 5.0: element stride times the item size, packed sub-byte types included.
Wide byte_stride(Wide stride, const Reference& ref) { return stride * ((ref.bits + 7) / 8); }

void check_tensor(const holoscan::Tensor& tensor, const DLTensor& source, std::uint64_t flags) {
  const Reference ref = reference_of(source, flags);
  check(tensor.ndim() == source.ndim, "ndim");
  check(tensor.size() == ref.size, "size");
  const Wide bytes = ref.packed ? (ref.size * ref.bits + 7) / 8 : ref.size * ((ref.bits + 7) / 8);
  check(tensor.nbytes() == bytes, "nbytes");
  check(tensor.itemsize() == (ref.bits + 7) / 8, "itemsize");
  const auto shape = tensor.shape();
  const auto strides = tensor.strides();
  Wide compact = 1;
  for (std::int32_t i = source.ndim; i-- > 0;) {
    check(shape[i] == source.shape[i], "shape");
    const Wide elements = source.strides != nullptr ? Wide{source.strides[i]} : compact;
    check(strides[i] == byte_stride(elements, ref), "strides in bytes");
    check(tensor.dl_tensor().strides[i] == elements, "strides in elements");
    compact *= source.shape[i] > 0 ? source.shape[i] : 1;
  }
  if (source.data != nullptr) {
    check(tensor.data() == static_cast<char*>(source.data) + source.byte_offset, "data");
  }
  check(tensor.is_read_only(), "imports are read-only");
}

// Exports `tensor` both ways and imports each export again: the same tensor must come back.
void round_trip(const holoscan::Tensor& tensor) {
  auto versioned = tensor.to_dlpack_versioned();
  check(versioned.has_value(), "a valid tensor exports");
  auto again = holoscan::make_tensor_from_dlpack_versioned(*versioned);
  check(again.has_value(), "a versioned export re-imports");
  check(again->shape() == tensor.shape() && again->strides() == tensor.strides() &&
            again->nbytes() == tensor.nbytes() && again->data() == tensor.data(),
        "versioned round trip");
  // Legacy DLPack cannot say read-only: refused for the import, exported for a writable view.
  auto refused = tensor.to_dlpack();
  check(!refused.has_value() && refused.error().code == holoscan::ErrorCode::kNotSupported,
        "a legacy export of read-only authority is refused");
  auto context = std::make_shared<holoscan::DLManagedTensorContext>(*tensor.dl_ctx());
  holoscan::detail::ContextAccess::restore_writable(*context);
  context->tensor.flags &= ~static_cast<std::uint64_t>(DLPACK_FLAG_BITMASK_READ_ONLY);
  const holoscan::Tensor writable(std::move(context));
  auto legacy = writable.to_dlpack();
  if (!legacy.has_value()) {
    check(legacy.error().code == holoscan::ErrorCode::kInvalidArgument, "legacy refusal code");
    check((tensor.flags() & (std::uint64_t{1} << 2)) != 0, "only padded sub-byte is refused");
    return;
  }
  auto from_legacy = holoscan::make_tensor_from_dlpack(*legacy);
  check(from_legacy.has_value(), "a legacy export re-imports");
  check(from_legacy->nbytes() == tensor.nbytes() && from_legacy->strides() == tensor.strides(),
        "legacy round trip");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  holoscan_fuzz::Bytes bytes(data, size);
  holoscan_fuzz::Input in;
  holoscan_fuzz::read_input(bytes, in);
  Producer producer;
  const DLTensor& view = in.view;
  const bool use_legacy = in.legacy;
  const std::uint64_t flags = in.flags;
  producer.versioned.version = in.version;
  producer.versioned.flags = flags;
  producer.versioned.manager_ctx = &producer;
  producer.versioned.deleter = [](DLManagedTensorVersioned* self) {
    ++static_cast<Producer*>(self->manager_ctx)->deleter_calls;
  };
  producer.versioned.dl_tensor = view;
  producer.legacy.manager_ctx = &producer;
  producer.legacy.deleter = [](DLManagedTensor* self) {
    ++static_cast<Producer*>(self->manager_ctx)->deleter_calls;
  };
  producer.legacy.dl_tensor = view;

  {
    auto imported = use_legacy ? holoscan::make_tensor_from_dlpack(&producer.legacy)
                               : holoscan::make_tensor_from_dlpack_versioned(&producer.versioned);
    if (!imported.has_value()) {
      check(imported.error().code == holoscan::ErrorCode::kInvalidArgument,
            "rejections are kInvalidArgument");
      check(!imported.error().message.empty(), "rejections say why");
      check(producer.deleter_calls == 0, "a rejection leaves ownership with the caller");
      return 0;  // the producer is the caller here: nothing was allocated to free
    }
    check_tensor(*imported, view, use_legacy ? 0 : flags);
    const holoscan::Tensor copy = *imported;  // NOLINT(performance-unnecessary-copy-initialization)
    check(copy.dl_ctx() == imported->dl_ctx(), "copies share the context");
    round_trip(copy);
    check(producer.deleter_calls == 0, "no deleter while a Tensor lives");
  }
  check(producer.deleter_calls == 1, "the deleter runs exactly once");
  return 0;
}
