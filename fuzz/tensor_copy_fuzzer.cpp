// Fuzzes the host copies (Tensor::copy, copy_to, copy_to_host) of views with any small shape and
// any strides (negative, zero, overlapping), against an element-by-element gather. The copy plan
// it runs is the one the device copies hand to cudaMemcpy2DAsync, so each piece is checked against
// that call's rules too (width within both pitches). The producer's deleter runs exactly once.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include <holoscan/tensor.hpp>

#include "dlpack/copy_plan.hpp"
#include "dlpack_input.hpp"

namespace {

using holoscan_fuzz::check;

// Byte-aligned element types, from one byte to sixteen (two-lane and complex ones included).
constexpr DLDataType kTypes[] = {
    {kDLInt, 8, 1},    {kDLUInt, 16, 1},     {kDLFloat, 32, 1}, {kDLInt, 64, 1},
    {kDLFloat, 32, 2}, {kDLComplex, 128, 1}, {kDLBool, 8, 1},   {kDLFloat, 16, 3},
};

struct View {
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;  // elements
  std::size_t item = 1;               // bytes
  std::int64_t first = 0;             // element index of the first element in the buffer
  std::int64_t span = 0;              // elements the buffer must hold
  std::int64_t count = 1;
};

// A view of at most 5 dimensions of at most 4 elements, strides in [-6, 9].
View read_view(holoscan_fuzz::Bytes& bytes, DLDataType& dtype) {
  View v;
  dtype = kTypes[bytes.take<std::uint8_t>() % (sizeof(kTypes) / sizeof(kTypes[0]))];
  v.item = static_cast<std::size_t>(dtype.bits / 8 * dtype.lanes);
  const int ndim = bytes.take<std::uint8_t>() % 6;
  std::int64_t low = 0;
  std::int64_t high = 0;
  for (int i = 0; i < ndim; ++i) {
    v.shape.push_back(bytes.take<std::uint8_t>() % 5);
    v.strides.push_back(static_cast<std::int64_t>(bytes.take<std::uint8_t>() % 16) - 6);
    v.count *= v.shape.back();
  }
  for (int i = 0; i < ndim; ++i) {
    const std::int64_t reach = v.shape[i] > 0 ? (v.shape[i] - 1) * v.strides[i] : 0;
    (reach < 0 ? low : high) += reach;
  }
  v.first = -low;
  v.span = high - low + 1 + bytes.take<std::uint8_t>() % 3;  // some room after the last
  return v;
}

// The elements of `v` in row-major order, gathered one at a time.
std::vector<std::uint8_t> gather(const std::vector<std::uint8_t>& buffer, const View& v) {
  std::vector<std::uint8_t> out;
  if (v.count == 0) {
    return out;
  }
  std::vector<std::int64_t> index(v.shape.size(), 0);
  while (true) {
    std::int64_t element = v.first;
    for (std::size_t d = 0; d < v.shape.size(); ++d) {
      element += index[d] * v.strides[d];
    }
    const auto* at = buffer.data() + element * static_cast<std::int64_t>(v.item);
    out.insert(out.end(), at, at + v.item);
    std::size_t d = v.shape.size();
    while (d > 0 && ++index[d - 1] == v.shape[d - 1]) {
      index[--d] = 0;
    }
    if (d == 0) {
      return out;
    }
  }
}

std::vector<std::uint8_t> bytes_of(const holoscan::Tensor& tensor) {
  const auto* first = static_cast<const std::uint8_t*>(tensor.data());
  return std::vector<std::uint8_t>(first, first + tensor.nbytes());
}

// Every piece as cudaMemcpy2DAsync would take it, inside the compact copy and the source's span.
void check_plan(const DLTensor& view, const View& v, std::int64_t bytes) {
  auto plan = holoscan::detail::CopyPlan::of(view, 0, "fuzz");
  check(plan.has_value(), "a byte-aligned view has a plan");
  check(plan->bytes() == bytes, "the plan's bytes");
  const auto item = static_cast<std::int64_t>(v.item);
  std::int64_t covered = 0;
  (void)plan->for_each_piece([&](const holoscan::detail::CopyPiece& piece) {
    check(piece.width > 0 && piece.height > 0, "a piece copies something");
    if (piece.height > 1) {
      check(piece.width <= piece.source_pitch && piece.width <= piece.destination_pitch,
            "cudaMemcpy2DAsync: the width fits both pitches");
    }
    const auto rows = static_cast<std::int64_t>(piece.height);
    const auto width = static_cast<std::int64_t>(piece.width);
    const std::int64_t source_first = v.first * item + piece.source_offset;
    const std::int64_t source_last =
        source_first + (rows - 1) * static_cast<std::int64_t>(piece.source_pitch) + width;
    check(source_first >= 0 && source_last <= v.span * item, "a piece reads inside the source");
    const std::int64_t destination_last =
        piece.destination_offset + (rows - 1) * static_cast<std::int64_t>(piece.destination_pitch) +
        width;
    check(piece.destination_offset >= 0 && destination_last <= bytes,
          "a piece writes inside the copy");
    covered += rows * width;
    return holoscan::expected<void, holoscan::Error>{};
  });
  check(covered == bytes, "the pieces cover the copy once");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  holoscan_fuzz::Bytes bytes(data, size);
  DLDataType dtype{};
  const View v = read_view(bytes, dtype);
  std::vector<std::uint8_t> buffer(static_cast<std::size_t>(v.span) * v.item);
  for (std::size_t i = 0; i < buffer.size(); ++i) {
    buffer[i] = static_cast<std::uint8_t>(i * 131 + i / 256 + 7);
  }
  DLTensor view{};
  view.data = buffer.data();
  view.byte_offset = static_cast<std::uint64_t>(v.first) * v.item;
  view.device = DLDevice{kDLCPU, 0};
  view.ndim = static_cast<std::int32_t>(v.shape.size());
  view.dtype = dtype;
  std::vector<std::int64_t> shape = v.shape;
  std::vector<std::int64_t> strides = v.strides;
  view.shape = shape.empty() ? nullptr : shape.data();
  view.strides = strides.empty() ? nullptr : strides.data();

  int deleter_calls = 0;
  DLManagedTensorVersioned producer{};
  producer.version = DLPackVersion{DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
  producer.manager_ctx = &deleter_calls;
  producer.deleter = [](DLManagedTensorVersioned* self) {
    ++*static_cast<int*>(self->manager_ctx);
  };
  producer.dl_tensor = view;
  const std::vector<std::uint8_t> expected_bytes = gather(buffer, v);
  const auto nbytes = static_cast<std::int64_t>(expected_bytes.size());
  {
    auto source = holoscan::make_tensor_from_dlpack_versioned(&producer);
    check(source.has_value(), "a view inside its buffer imports");
    check(source->nbytes() == nbytes, "nbytes");
    if (v.count > 0) {
      check_plan(view, v, nbytes);
    }
    auto copy = source->copy(nullptr);
    if (v.count == 0) {
      // Nothing to copy is still a copy: an empty compact tensor, or a refusal that says so.
      check(!copy.has_value() || copy->nbytes() == 0, "an empty copy");
    } else {
      check(copy.has_value(), "a host view copies");
      check(copy->is_contiguous() && !copy->is_read_only(), "a compact writable copy");
      check(copy->shape() == source->shape(), "the copy's shape");
      check(bytes_of(*copy) == expected_bytes, "Tensor::copy gathers every element");
      auto again = copy->copy_to(DLDevice{kDLCPU, 0}, nullptr);
      check(again.has_value() && bytes_of(*again) == expected_bytes, "a copy of the copy");
      std::vector<std::uint8_t> out(expected_bytes.size() + 8, 0xEE);
      check(source->copy_to_host(out.data(), out.size(), nullptr).has_value(), "copy_to_host");
      check(std::memcmp(out.data(), expected_bytes.data(), expected_bytes.size()) == 0,
            "copy_to_host gathers every element");
      for (std::size_t i = expected_bytes.size(); i < out.size(); ++i) {
        check(out[i] == 0xEE, "copy_to_host writes nothing past nbytes()");
      }
      auto small = source->copy_to_host(out.data(), expected_bytes.size() - 1, nullptr);
      check(!small.has_value() && small.error().code == holoscan::ErrorCode::kInvalidArgument,
            "a destination one byte short is refused");
    }
    check(deleter_calls == 0, "the deleter waits for the last Tensor");
  }
  check(deleter_calls == 1, "the deleter runs once");
  return 0;
}
