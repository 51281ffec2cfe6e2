// Fuzzes the public functions that take untrusted metadata and that no other fuzzer reaches: the
// NumPy type strings (both directions), make_tensor with byte strides, and Tensors over contexts
// written by hand (the accessors and both exports). Every refusal must be kInvalidArgument with a
// message and keep nothing; whatever is accepted must export and import back the same.
#include <dlpack/dlpack.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <holoscan/dlpack_context.hpp>
#include <holoscan/dlpack_utils.hpp>
#include <holoscan/make_tensor.hpp>
#include <holoscan/tensor.hpp>

#include "dlpack_input.hpp"

namespace {

using holoscan_fuzz::check;
__extension__ using Wide = __int128;  // sizes computed without overflow, as the reference

void check_refusal(const holoscan::Error& error, const char* what) {
  check(error.code == holoscan::ErrorCode::kInvalidArgument, what);
  check(!error.message.empty(), "refusals say why");
}

// A type string, and the name of the type it parses to, parse to the same type.
void fuzz_typestr(std::string_view text) {
  const auto parsed = holoscan::dldatatype_from_typestr(text);
  if (!parsed) {
    check_refusal(parsed.error(), "a type string is refused as kInvalidArgument");
    return;
  }
  check(parsed->lanes == 1 && parsed->bits > 0 && parsed->bits % 8 == 0, "a parsed type is sane");
  const auto name = holoscan::numpy_dtype(*parsed);
  check(name.has_value(), "every parsed type has a name");
  const auto again = holoscan::dldatatype_from_typestr(*name);
  check(again && again->code == parsed->code && again->bits == parsed->bits,
        "a type string round-trips");
}

// Any DLDataType's name, if it has one, parses back to the same type (lanes are not named).
void fuzz_numpy_name(holoscan_fuzz::Bytes& bytes) {
  const DLDataType dtype{bytes.take<std::uint8_t>(), bytes.take<std::uint8_t>(),
                         bytes.take<std::uint16_t>()};
  const auto name = holoscan::numpy_dtype(dtype);
  if (!name) {
    check_refusal(name.error(), "a type without a name is kInvalidArgument");
    return;
  }
  const auto again = holoscan::dldatatype_from_typestr(*name);
  check(again && again->code == dtype.code && again->bits == dtype.bits, "a name round-trips");
}

// make_tensor over host memory (never read), with or without byte strides (sometimes one too
// many): the release runs once, and only for what was accepted.
void fuzz_make_tensor(holoscan_fuzz::Bytes& bytes) {
  const auto kind = bytes.take<std::uint8_t>();
  const int ndim = bytes.take<std::uint8_t>() % 72;
  std::vector<std::int64_t> shape;
  for (int i = 0; i < ndim; ++i) {
    shape.push_back(bytes.extent());
  }
  const bool has_strides = (kind & 1) != 0;
  std::vector<std::int64_t> byte_strides;
  for (int i = 0; has_strides && i < ndim + ((kind & 2) != 0 ? 1 : 0); ++i) {
    byte_strides.push_back(bytes.extent());
  }
  const DLDataType dtype{bytes.take<std::uint8_t>(), bytes.take<std::uint8_t>(),
                         bytes.take<std::uint16_t>()};
  const auto address = (kind & 4) != 0 ? bytes.take<std::uint64_t>() : std::uint64_t{0x10000};
  void* data = reinterpret_cast<void*>(static_cast<std::uintptr_t>(address));
  int releases = 0;
  {
    auto release = [&](void*) -> holoscan::expected<void, holoscan::Error> {
      ++releases;
      return {};
    };
    auto tensor = has_strides
                      ? holoscan::make_tensor(shape, dtype, byte_strides,
                                              holoscan::MemoryStorageType::kSystem, data, release)
                      : holoscan::make_tensor(shape, dtype, std::nullopt,
                                              holoscan::MemoryStorageType::kSystem, data, release);
    if (!tensor) {
      check_refusal(tensor.error(), "make_tensor refuses with kInvalidArgument");
      check(releases == 0, "a refusal never releases");
      return;
    }
    check(data != nullptr, "null data is refused");
    check(!has_strides || byte_strides.size() == shape.size(), "a stride per dimension");
    check(tensor->ndim() == ndim && tensor->shape() == shape, "the shape is kept");
    Wide size = 1;
    for (const std::int64_t extent : shape) {
      size *= extent;
    }
    check(tensor->size() == size, "size");
    const Wide bits = Wide{dtype.bits} * dtype.lanes;
    const bool packed = bits % 8 != 0;
    const Wide nbytes = packed ? (size * bits + 7) / 8 : size * ((bits + 7) / 8);
    check(tensor->nbytes() == nbytes, "nbytes");
    if (has_strides && !packed) {
      check(tensor->strides() == byte_strides, "byte strides come back as given");
    }
    auto exported = tensor->to_dlpack_versioned();
    check(exported.has_value(), "what make_tensor accepts exports");
    auto back = holoscan::make_tensor_from_dlpack_versioned(*exported);
    check(back.has_value(), "and imports back");
    check(back->strides() == tensor->strides() && back->nbytes() == tensor->nbytes(),
          "the same layout");
  }
  check(releases == 1, "the release runs exactly once");
}

// Where a hand-written view keeps its shape and strides in its context: at the start of each
// vector, a few elements into each (a sub-view), or both in dl_shape, one after the other.
enum class Placement : std::uint8_t { kAtTheStart, kInside, kStridesInShape };

// Fills `context`'s vectors from `in` as `placement` says and points its view at them.
void place_view(const holoscan_fuzz::Input& in, Placement placement, std::size_t skip,
                holoscan::DLManagedTensorContext& context) {
  if (placement == Placement::kAtTheStart) {
    skip = 0;
  }
  context.dl_shape.assign(skip, -1);  // elements before the view's: never read through it
  context.dl_shape.insert(context.dl_shape.end(), in.shape.begin(), in.shape.end());
  context.dl_strides.assign(placement == Placement::kInside ? skip : 0, -1);
  std::vector<std::int64_t>& strides_home =
      placement == Placement::kStridesInShape ? context.dl_shape : context.dl_strides;
  const std::size_t strides_at = strides_home.size();
  strides_home.insert(strides_home.end(), in.strides.begin(), in.strides.end());
  context.tensor.dl_tensor.shape = in.view.shape != nullptr ? context.dl_shape.data() + skip : nullptr;
  context.tensor.dl_tensor.strides =
      in.view.strides != nullptr ? strides_home.data() + strides_at : nullptr;
}

// A Tensor over a context written by hand: every accessor is safe, and an export (which checks
// such a view in full) that succeeds imports back with the same layout. Through a copy of the
// context (made by copy or by assignment) when the bytes say so, the original gone before the
// copy is used: the copy reads its own vectors only, wherever in them the view pointed.
void fuzz_hand_written_context(holoscan_fuzz::Bytes& bytes) {
  const auto how = bytes.take<std::uint8_t>();
  holoscan_fuzz::Input in;
  holoscan_fuzz::read_input(bytes, in);
  auto context = std::make_shared<holoscan::DLManagedTensorContext>();
  context->tensor.version = in.version;
  context->tensor.flags = in.flags;
  context->tensor.dl_tensor = in.view;
  place_view(in, static_cast<Placement>(how % 3), (how >> 2) % 4, *context);
  if ((how & 0x40) != 0) {
    auto copy = std::make_shared<holoscan::DLManagedTensorContext>();
    if ((how & 0x20) != 0) {
      *copy = *context;
    } else {
      copy = std::make_shared<holoscan::DLManagedTensorContext>(*context);
    }
    const std::vector<std::int64_t> shape = context->tensor.dl_tensor.shape != nullptr &&
                                                    context->tensor.dl_tensor.ndim > 0
                                                ? in.shape
                                                : std::vector<std::int64_t>{};
    context = std::move(copy);  // the original is gone
    if (!shape.empty()) {
      const auto& view = context->tensor.dl_tensor;
      check(std::vector<std::int64_t>(view.shape, view.shape + view.ndim) == shape,
            "a copied context reads its own shape");
    }
  }
  const holoscan::Tensor tensor(context);
  (void)tensor.size();
  (void)tensor.nbytes();
  (void)tensor.itemsize();
  (void)tensor.shape();
  (void)tensor.strides();
  (void)tensor.is_contiguous();
  (void)tensor.data();
  (void)tensor.is_read_only();
  if (auto versioned = tensor.to_dlpack_versioned()) {
    auto back = holoscan::make_tensor_from_dlpack_versioned(*versioned);
    check(back.has_value(), "a hand-written view's export imports back");
    check(back->nbytes() == tensor.nbytes() && back->strides() == tensor.strides(),
          "with the same layout");
  } else {
    check(!versioned.error().message.empty(), "a refused export says why");
  }
  if (auto legacy = tensor.to_dlpack()) {
    check(holoscan::make_tensor_from_dlpack(*legacy).has_value(),
          "a hand-written view's legacy export imports back");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) {
    return 0;
  }
  holoscan_fuzz::Bytes bytes(data + 1, size - 1);
  switch (data[0] % 4) {
    case 0:
      fuzz_typestr(std::string_view(reinterpret_cast<const char*>(data + 1), size - 1));
      break;
    case 1:
      fuzz_numpy_name(bytes);
      break;
    case 2:
      fuzz_make_tensor(bytes);
      break;
    default:
      fuzz_hand_written_context(bytes);
      break;
  }
  return 0;
}
