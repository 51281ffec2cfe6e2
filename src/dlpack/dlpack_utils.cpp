#include "holoscan/dlpack_utils.hpp"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <functional>
#include <new>
#include <string>

#include "dlpack/dlpack_validate.hpp"
#include "dlpack/without_throwing.hpp"
#include "holoscan/dlpack.hpp"

namespace holoscan {
namespace {

// Whether `values` points into the storage of `owned` (its whole room, not only its size).
bool points_into(const std::vector<std::int64_t>& owned, const std::int64_t* values) {
  const std::less<const std::int64_t*> before;
  return values != nullptr && !before(values, owned.data()) &&
         before(values, owned.data() + owned.capacity());
}

// `count` values of `values`, read into `copy` first when they lie in either vector that is about
// to be written: a source's shape or strides may point into the destination's own storage, and
// the first vector written could overwrite or move what the second is read from.
const std::int64_t* read_apart(const std::int64_t* values, std::size_t count,
                               const std::vector<std::int64_t>& shape,
                               const std::vector<std::int64_t>& strides,
                               std::vector<std::int64_t>& copy) {
  if (!points_into(shape, values) && !points_into(strides, values)) {
    return values;
  }
  copy.assign(values, values + count);
  return copy.data();
}

// Copies `count` values into `owned` (not aliasing it) without allocating when it has the room.
void assign_owned(std::vector<std::int64_t>& owned, const std::int64_t* values, std::size_t count) {
  owned.resize(count);
  if (count > 0) {
    std::memcpy(owned.data(), values, count * sizeof(std::int64_t));
  }
}

}  // namespace

void copy_dl_tensor_with_owned_metadata(const DLTensor& source, DLTensor& destination,
                                        std::vector<std::int64_t>& owned_shape,
                                        std::vector<std::int64_t>& owned_strides,
                                        DLPackMetadataCopyOptions options) {
  const DLTensor view = source;  // `destination` may be `source`
  const auto ndim = static_cast<std::size_t>(view.ndim > 0 ? view.ndim : 0);
  std::vector<std::int64_t> shape_copy;
  std::vector<std::int64_t> strides_copy;
  const std::int64_t* shape = read_apart(view.shape, ndim, owned_shape, owned_strides, shape_copy);
  const std::int64_t* strides =
      read_apart(view.strides, ndim, owned_shape, owned_strides, strides_copy);
  // The room first, apart, so that nothing below allocates: `destination` may point into the
  // owned vectors (a context's view does), and growing one and then being refused the other
  // would leave it pointing at freed room. Refused here, nothing has changed; the old room is
  // freed only once `destination` points at the new one.
  std::vector<std::int64_t> shape_room;
  std::vector<std::int64_t> strides_room;
  if (owned_shape.capacity() < ndim) {
    shape_room.reserve(ndim);
  }
  if (owned_strides.capacity() < ndim) {
    strides_room.reserve(ndim);
  }
  if (shape_room.capacity() != 0) {
    owned_shape.swap(shape_room);
  }
  if (strides_room.capacity() != 0) {
    owned_strides.swap(strides_room);
  }
  // A view without a shape keeps none, as in 5.0: zeros in its place made a malformed view (which
  // an export refuses) a valid empty tensor, and strides made from them.
  assign_owned(owned_shape, shape, shape != nullptr ? ndim : 0);
  if (strides != nullptr) {
    assign_owned(owned_strides, strides, ndim);
  } else if (options.materialize_implicit_strides && shape != nullptr) {
    owned_strides.resize(ndim);
    detail::compact_strides(view.ndim, owned_shape.data(), owned_strides.data());
  } else {
    owned_strides.clear();
  }
  destination = view;
  destination.shape = ndim > 0 && shape != nullptr ? owned_shape.data() : nullptr;
  destination.strides = ndim > 0 && !owned_strides.empty() ? owned_strides.data() : nullptr;
}

void copy_dl_tensor_with_owned_metadata(DLManagedTensorContext& context, const DLTensor& source,
                                        DLPackMetadataCopyOptions options) {
  copy_dl_tensor_with_owned_metadata(source, context.tensor.dl_tensor, context.dl_shape,
                                     context.dl_strides, options);
  context.tensor.version =
      DLPackVersion{HOLOSCAN_DLPACK_IMPL_VERSION_MAJOR, HOLOSCAN_DLPACK_IMPL_VERSION_MINOR};
  context.tensor.flags = 0;
  context.tensor.manager_ctx = nullptr;
  context.tensor.deleter = nullptr;
}

void copy_dl_tensor_with_owned_metadata(DLManagedTensorContext& context,
                                        const DLManagedTensorVersioned& source,
                                        DLPackMetadataCopyOptions options) {
  const DLPackVersion version = source.version;  // `source` may be the context's own view
  const std::uint64_t flags = source.flags;
  copy_dl_tensor_with_owned_metadata(context, source.dl_tensor, options);
  context.tensor.version = version;
  context.tensor.flags = flags;
}

bool dlpack_version_requires_explicit_strides(DLPackVersion version) noexcept {
  return version.major > 1 || (version.major == 1 && version.minor >= 2);
}

std::uint64_t dlpack_dtype_item_size_bytes(DLDataType dtype) noexcept {
  return (static_cast<std::uint64_t>(dtype.bits) * dtype.lanes + 7) / 8;
}

void calc_strides(const DLTensor& tensor, std::vector<std::int64_t>& strides,
                  bool to_num_elements) {
  const std::int32_t ndim = tensor.ndim > 0 ? tensor.ndim : 0;
  strides.resize(static_cast<std::size_t>(ndim));
  if (tensor.strides != nullptr) {
    std::copy(tensor.strides, tensor.strides + ndim, strides.begin());
  } else if (tensor.shape != nullptr) {
    detail::compact_strides(ndim, tensor.shape, strides.data());
  } else {
    strides.clear();  // nothing to derive them from: empty, as Holoscan 5.0 leaves them
  }
  if (to_num_elements) {
    return;
  }
  // Byte strides count whole items, as dlpack_dtype_item_size_bytes does (lanes included).
  for (auto& stride : strides) {
    stride = detail::stride_in_bytes(stride, tensor.dtype, detail::kSubBytePaddedFlag);
  }
}

expected<DLDataType, Error> dldatatype_from_typestr(std::string_view typestr) try {
  // Each refusal carries Holoscan 5.0's sentence, so code matching on it sees the same text.
  const auto refuse = [&](const std::string& why) {
    return make_unexpected(ErrorCode::kInvalidArgument,
                           "dldatatype_from_typestr: Failed to determine DLDataType from type "
                           "string: " +
                               why + " in '" + std::string(typestr) + "'");
  };
  // As in 5.0, a '>' is refused even for one byte: the data is read in this host's byte order,
  // which the library supports only little-endian.
  if (!typestr.empty() && typestr[0] == '>') {
    return refuse("big endian types are not supported");
  }
  const char kind = typestr.size() > 1 ? typestr[1] : '\0';
  if (kind != 'b' && kind != 'i' && kind != 'u' && kind != 'f' && kind != 'c') {
    return refuse("unsupported dtype.kind '" +
                  std::string(typestr.substr(typestr.empty() ? 0 : 1, 1)) + "'");
  }
  if (typestr.size() == 2) {
    return refuse("missing itemsize");
  }
  const std::string_view itemsize = typestr.substr(2);
  const auto unsupported_itemsize = [&] {
    return refuse("unsupported itemsize '" + std::string(itemsize) + "'");
  };
  const char order = typestr[0];
  if (order != '<' && order != '|' && order != '=') {
    return refuse("unsupported byte order '" + std::string(1, order) + "'");
  }
  unsigned long bytes = 0;
  const char* const end = itemsize.data() + itemsize.size();
  const auto parsed = std::from_chars(itemsize.data(), end, bytes);
  if (parsed.ec != std::errc() || parsed.ptr != end || bytes == 0 || bytes > 16) {
    return unsupported_itemsize();
  }
  const auto bits = static_cast<std::uint8_t>(bytes * 8);
  switch (kind) {
    case 'b':
      if (bytes == 1) {
        return DLDataType{kDLBool, 8, 1};
      }
      break;
    case 'i':
    case 'u':
      if (bytes == 1 || bytes == 2 || bytes == 4 || bytes == 8) {
        return DLDataType{static_cast<std::uint8_t>(kind == 'i' ? kDLInt : kDLUInt), bits, 1};
      }
      break;
    case 'f':
      if (bytes == 2 || bytes == 4 || bytes == 8) {
        return DLDataType{kDLFloat, bits, 1};
      }
      break;
    case 'c':
      if (bytes == 8 || bytes == 16) {
        return DLDataType{kDLComplex, static_cast<std::uint8_t>(bytes * 8), 1};
      }
      break;
    default:
      break;
  }
  return unsupported_itemsize();
} catch (const std::bad_alloc&) {
  return detail::out_of_memory();
}

// Names the type of one lane: `lanes` is not read, as in Holoscan 5.0 ({kDLFloat, 32, 4} gives
// "<f4"). A caller that describes whole elements (an array interface) checks lanes itself.
expected<const char*, Error> numpy_dtype(DLDataType dtype) try {
  switch (dtype.code) {
    case kDLBool:
      if (dtype.bits == 8) return "|b1";
      break;
    case kDLInt:
      switch (dtype.bits) {
        case 8:
          return "|i1";
        case 16:
          return "<i2";
        case 32:
          return "<i4";
        case 64:
          return "<i8";
        default:
          break;
      }
      break;
    case kDLUInt:
      switch (dtype.bits) {
        case 8:
          return "|u1";
        case 16:
          return "<u2";
        case 32:
          return "<u4";
        case 64:
          return "<u8";
        default:
          break;
      }
      break;
    case kDLFloat:
      switch (dtype.bits) {
        case 16:
          return "<f2";
        case 32:
          return "<f4";
        case 64:
          return "<f8";
        default:
          break;
      }
      break;
    case kDLComplex:
      switch (dtype.bits) {
        case 64:
          return "<c8";
        case 128:
          return "<c16";
        default:
          break;
      }
      break;
    default:
      break;
  }
  return make_unexpected(ErrorCode::kInvalidArgument,
                         "numpy_dtype: Failed to determine type string from DLDataType: "
                         "unsupported (code=" +
                             std::to_string(dtype.code) + ", bits=" + std::to_string(dtype.bits) +
                             ")");
} catch (const std::bad_alloc&) {
  return detail::out_of_memory();
}

}  // namespace holoscan
