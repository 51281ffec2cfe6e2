// Fuzzes the one set of layout rules (src/dlpack_validate.*) that DLPack import, exports, the pool,
// the IPC descriptor and the UCX header share, against a slow reference in 128-bit arithmetic:
// for a DLTensor (this build's type codes) and for a bare layout (DLPack 1.3's codes, as the wire
// formats read them), every verdict must agree (the rule broken and its dimension) and, for a
// valid layout, every computed size: element count, payload bytes and the span on both sides of
// the first element. Refusals must put the field into words.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>

#include "dlpack/dlpack_validate.hpp"
#include "dlpack_input.hpp"
#include "holoscan/tensor.hpp"

namespace {

using holoscan::detail::LayoutFacts;
using holoscan::detail::LayoutFault;
using holoscan_fuzz::check;

__extension__ typedef __int128 Wide;  // every product below fits: inputs are capped first
constexpr Wide kMax = std::numeric_limits<std::int64_t>::max();
constexpr Wide kHuge = Wide{1} << 100;  // stands for "far beyond int64" without overflowing

// The dtype rules, spelled out again.
LayoutFault reference_dtype(DLDataType dtype, int last_code) {
  if (dtype.code > last_code) {
    return LayoutFault::kDtypeCode;
  }
  if (dtype.lanes == 0) {
    return LayoutFault::kDtypeLanes;
  }
  if (dtype.bits == 0) {
    return LayoutFault::kDtypeBits;
  }
  const int sub_byte = dtype.code == 17 ? 4 : (dtype.code == 15 || dtype.code == 16 ? 6 : 0);
  // One lane, or lanes that fill whole bytes (float4 x2: a byte).
  if (sub_byte != 0 && (dtype.bits != sub_byte ||
                        (dtype.lanes != 1 && (Wide{dtype.bits} * dtype.lanes) % 8 != 0))) {
    return LayoutFault::kDtypeSubByte;
  }
  if (sub_byte == 0 && dtype.bits % 8 != 0) {
    return LayoutFault::kDtypeWholeBytes;
  }
  return LayoutFault::kNone;
}

// Elements to bytes in 128 bits: whole items, or packed bits rounded up.
struct Unit {
  Wide bits;
  Wide item;
  bool packed;
  Unit(DLDataType dtype, std::uint64_t flags)
      : bits(Wide{dtype.bits} * dtype.lanes),
        item((bits + 7) / 8),
        packed(bits % 8 != 0 && (flags & holoscan::detail::kSubBytePaddedFlag) == 0) {}
  Wide bytes(Wide elements) const {
    if (elements > kHuge) {
      return kHuge;
    }
    return packed ? (elements * bits + 7) / 8 : elements * item;
  }
};

struct Reference {
  LayoutFault fault = LayoutFault::kNone;
  std::int32_t index = 0;
  Wide size = 0;
  Wide nbytes = 0;
  Wide low = 0;
  Wide high = 0;
};

Reference refused(LayoutFault fault, std::int32_t index = 0) {
  Reference r;
  r.fault = fault;
  r.index = index;
  return r;
}

Reference reference_layout(std::int32_t ndim, const std::int64_t* shape,
                           const std::int64_t* strides, DLDataType dtype, std::uint64_t flags,
                           int last_code) {
  if (ndim < 0 || ndim > holoscan::kMaxTensorDims) {
    return refused(LayoutFault::kNdim);
  }
  if (ndim > 0 && shape == nullptr) {
    return refused(LayoutFault::kShapeNull);
  }
  if (const LayoutFault fault = reference_dtype(dtype, last_code); fault != LayoutFault::kNone) {
    return refused(fault);
  }
  const bool sub_byte_code = dtype.code == 15 || dtype.code == 16 || dtype.code == 17;
  if ((flags & holoscan::detail::kSubBytePaddedFlag) != 0 && dtype.lanes != 1 && sub_byte_code) {
    return refused(LayoutFault::kDtypePaddedLanes);  // padding is defined for one lane
  }
  const Unit unit(dtype, flags);
  Reference r;
  Wide size = 1;
  Wide compact = 1;
  for (std::int32_t i = ndim; i-- > 0;) {
    if (shape[i] < 0) {
      return refused(LayoutFault::kExtent, i);
    }
    if (unit.bytes(compact) > kMax) {
      return refused(LayoutFault::kCompactStride, i);
    }
    size *= shape[i];
    if (size > kMax) {
      return refused(LayoutFault::kElementCount);
    }
    // The next dimension's compact stride; the first dimension has no next one.
    if (i > 0) {
      compact *= shape[i] > 0 ? shape[i] : 1;
      if (compact > kMax) {
        return refused(LayoutFault::kCompactStride, i - 1);
      }
    }
  }
  r.size = size;
  r.nbytes = unit.bytes(size);
  if (r.nbytes > kMax) {
    return refused(LayoutFault::kPayloadBytes);
  }
  if (strides == nullptr) {
    r.high = r.nbytes;
    return r;
  }
  Wide low = 0;
  Wide high = 1;  // the first element
  for (std::int32_t i = 0; i < ndim; ++i) {
    const Wide stride = strides[i];
    const Wide magnitude = stride < 0 ? -stride : stride;
    // Refused with the sizes kept: a DLTensor's data is checked against them first.
    if (unit.bytes(magnitude) > kMax) {
      r.fault = LayoutFault::kStrideBytes;
      r.index = i;
      return r;
    }
    if (size > 0) {
      const Wide reach = magnitude * (shape[i] - 1);
      if (unit.bytes(reach) > kMax) {
        r.fault = LayoutFault::kStrideSpan;
        r.index = i;
        return r;
      }
      (stride < 0 ? low : high) += reach;
    }
  }
  if (size > 0) {
    r.low = unit.bytes(low);
    r.high = unit.bytes(high);
    if (r.low > kMax || r.high > kMax) {
      r.fault = LayoutFault::kSpan;
      return r;
    }
  }
  return r;
}

Reference reference_dl_tensor(const DLTensor& t, std::uint64_t flags) {
  Reference r = reference_layout(t.ndim, t.shape, t.strides, t.dtype, flags,
                                 holoscan::detail::build_last_dtype_code());
  if (r.fault != LayoutFault::kNone && r.fault <= LayoutFault::kPayloadBytes) {
    return r;
  }
  if (!holoscan::detail::known_device_type(t.device.device_type)) {
    return refused(LayoutFault::kDeviceType);
  }
  if (t.device.device_id < 0) {
    return refused(LayoutFault::kDeviceId);
  }
  if (t.data == nullptr && r.size > 0) {
    return refused(LayoutFault::kDataNull);
  }
  if (r.fault != LayoutFault::kNone) {
    return r;
  }
  const Wide offset = t.byte_offset;
  if (offset > kMax || offset + r.high > kMax) {
    return refused(LayoutFault::kSpan);
  }
  const Wide first = Wide{reinterpret_cast<std::uintptr_t>(t.data)} + offset;
  if (first - r.low < 0 || first + r.high > Wide{std::numeric_limits<std::uintptr_t>::max()}) {
    return refused(LayoutFault::kAddress);
  }
  return r;
}

void agree(const LayoutFacts& facts, const Reference& ref) {
  if (facts.fault != ref.fault) {
    std::fprintf(stderr, "rule broken: %d (dimension %d), the reference's: %d (dimension %d)\n",
                 static_cast<int>(facts.fault), facts.index, static_cast<int>(ref.fault),
                 ref.index);
  }
  check(facts.fault == ref.fault, "the rule broken agrees with the reference");
  if (ref.fault == LayoutFault::kExtent || ref.fault == LayoutFault::kCompactStride ||
      ref.fault == LayoutFault::kStrideBytes || ref.fault == LayoutFault::kStrideSpan) {
    check(facts.index == ref.index, "the dimension named agrees with the reference");
  }
  if (ref.fault == LayoutFault::kNone) {
    check(facts.size == ref.size, "element count");
    check(facts.nbytes == ref.nbytes, "payload bytes");
    check(facts.span_low == ref.low, "span before the first element");
    check(facts.span_high == ref.high, "span from the first element on");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  holoscan_fuzz::Bytes bytes(data, size);
  holoscan_fuzz::Input in;
  holoscan_fuzz::read_input(bytes, in);
  const DLTensor& view = in.view;

  // A DLTensor, as DLPack import and make_tensor check it, writing its shape and strides out.
  std::int64_t shape_out[holoscan::kMaxTensorDims];
  std::int64_t strides_out[holoscan::kMaxTensorDims];
  LayoutFacts facts;
  const LayoutFault fault =
      holoscan::detail::check_dl_tensor(view, in.flags, facts, shape_out, strides_out);
  check(fault == facts.fault, "the fault returned is the one recorded");
  agree(facts, reference_dl_tensor(view, in.flags));
  if (fault != LayoutFault::kNone) {
    check(!holoscan::detail::dl_tensor_error(facts, view, "fuzz").message.empty(),
          "a refusal says why");
  } else {
    for (std::int32_t i = 0; i < view.ndim; ++i) {
      check(shape_out[i] == view.shape[i], "the extents are written out");
    }
    if (view.strides != nullptr) {
      for (std::int32_t i = 0; i < view.ndim; ++i) {
        check(strides_out[i] == view.strides[i], "explicit strides are written out");
      }
    } else if (view.ndim > 0) {
      std::int64_t compact[holoscan::kMaxTensorDims];
      holoscan::detail::compact_strides(view.ndim, view.shape, compact);
      for (std::int32_t i = 0; i < view.ndim; ++i) {
        check(strides_out[i] == compact[i], "compact strides are written out");
      }
    }
  }

  // The same layout as a wire format reads it (DLPack 1.3's type codes, no device or address).
  LayoutFacts wire;
  (void)holoscan::detail::check_layout(view.ndim, view.shape, view.strides, view.dtype, in.flags,
                                       holoscan::detail::kDLPack13LastDtypeCode, wire);
  agree(wire, reference_layout(view.ndim, view.shape, view.strides, view.dtype, in.flags,
                               holoscan::detail::kDLPack13LastDtypeCode));
  if (wire.fault != LayoutFault::kNone) {
    check(!holoscan::detail::layout_error(wire, view.ndim, view.shape, view.strides, view.dtype,
                                          "fuzz")
               .message.empty(),
          "a refusal says why");
  }
  return 0;
}
