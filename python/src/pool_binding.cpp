#include <nanobind/nanobind.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <holoscan/ipc/pool_memory.hpp>
#include <holoscan/tensor_pool.hpp>

#include "bindings.hpp"
#include "cast_arg.hpp"
#include "dtype.hpp"
#include "errors.hpp"
#include "no_pickling.hpp"
#include "stream_arg.hpp"
#include "without_gil.hpp"

namespace nb = nanobind;

namespace holoscan::python {
namespace {

PoolMemory parse_memory(nb::handle memory) {
  if (nb::isinstance<nb::str>(memory)) {
    const std::optional<std::string> name = utf8_text(memory);  // none: no name of ours
    if (name == "device") return PoolMemory::kDevice;
    if (name == "host") return PoolMemory::kHost;
    raise_invalid_argument("memory must be 'device' or 'host', not " +
                           display_text(nb::repr(memory)));
  }
  // A PoolMemory itself, not whatever nanobind's enum caster converts (True, 1, another enum
  // whose value happens to match): False would ask for a device pool.
  if (!nb::isinstance<PoolMemory>(memory)) {
    throw nb::type_error("memory must be 'device', 'host' or a PoolMemory");
  }
  return nb::cast<PoolMemory>(memory);
}

// The pool's integers, named in its refusals (named_integer).
template <typename T>
T pool_integer(nb::handle value, const char* name, const char* range) {
  return named_integer<T>(value, "TensorPool::create", name, range);
}

std::shared_ptr<TensorPool> create_pool(nb::handle memory, nb::handle device_arg,
                                        nb::handle block_bytes_arg, nb::handle block_count_arg,
                                        nb::handle shareable_arg) {
  const PoolMemory kind = parse_memory(memory);
  const int device = pool_integer<int>(device_arg, "device", "a 32-bit device id");
  const auto block_bytes =
      pool_integer<std::size_t>(block_bytes_arg, "block_bytes", "0 to 2**64-1");
  const auto block_count =
      pool_integer<std::size_t>(block_count_arg, "block_count", "0 to 2**64-1");
  TensorPoolConfig config{kind, device, block_bytes, block_count};
  if (bool_argument(shareable_arg, "shareable")) {
    if (config.memory != PoolMemory::kDevice) {
      raise_invalid_argument("TensorPool::create: only device memory can be shareable");
    }
    config.memory_provider = ipc::shareable_pool_memory();
  }
  // cudaMalloc of every block may take a while.
  expected<std::shared_ptr<TensorPool>, Error> pool =
      without_gil([&] { return TensorPool::create(config); });
  if (!pool) {
    raise_error(pool.error());
  }
  return std::move(*pool);
}

}  // namespace

void bind_pool(nb::module_& module) {
  nb::enum_<PoolMemory>(module, "PoolMemory", "Where a TensorPool takes its blocks from.")
      .value("kDevice", PoolMemory::kDevice,
             "cudaMalloc (the VMM API when shareable) on the pool's device (kDLCUDA).")
      .value("kHost", PoolMemory::kHost, "Pageable host memory (kDLCPU); needs no GPU.");

  nb::class_<TensorPool> pools(
      module, "TensorPool",
      "Fixed-size blocks handed out as writable Tensors, reused only "
      "when every handle is gone and the GPU passed every recorded point.");
  refuse_pickling(pools, "TensorPool");
  pools
      .def(nb::new_(&create_pool), nb::kw_only(), nb::arg("memory"), nb::arg("device").none() = 0,
           nb::arg("block_bytes").none(), nb::arg("block_count").none(),
           nb::arg("shareable").none() = false, Entry(),
           "Allocates `block_count` blocks of `block_bytes` up front; memory is a PoolMemory, "
           "'device' or 'host'. shareable=True (device only) allocates through the CUDA VMM "
           "API, so that an ipc.Exporter can publish its tensors to other processes.")
      .def_static("create", &create_pool, nb::kw_only(), nb::arg("memory"),
                  nb::arg("device").none() = 0, nb::arg("block_bytes").none(),
                  nb::arg("block_count").none(), nb::arg("shareable").none() = false, Entry(),
                  nb::sig("def create(*, memory: object, device: int = 0, block_bytes: int, "
                          "block_count: int, shareable: bool = False) -> TensorPool"),
                  "Same as the constructor (the C++ name).")
      .def(
          "allocate",
          [](TensorPool& pool, nb::handle shape, nb::handle dtype, nb::handle stream) {
            const std::vector<std::int64_t> extents =
                sequence_int64s(shape, "shape", Bools::kRefused);
            const DLDataType type = parse_dtype(dtype);
            auto tensor = stream.is_none() ? pool.allocate(extents, type)
                                           : pool.allocate(extents, type, parse_stream(stream));
            if (!tensor) {
              raise_error(tensor.error());
            }
            return std::move(*tensor);
          },
          nb::arg("shape"), nb::arg("dtype"), nb::kw_only(), nb::arg("stream") = nb::none(),
          Entry(),
          nb::sig("def allocate(self, shape: collections.abc.Sequence[int], dtype: object, *, "
                  "stream: object = None) -> Tensor"),
          "A compact, writable tensor in a block: without a stream, a free block only (its "
          "readers done); with the producer's `stream` (a handle, 1, 2 or a stream object, as "
          "set_readiness_stream takes it), a block nobody names, the stream made to wait for "
          "its readers' points (stream-ordered reuse; record the readiness on that stream). "
          "ResourceExhaustedError when none is free, InvalidArgumentError when the request can "
          "never fit a block.")
      .def("available_blocks", &TensorPool::available_blocks, Entry(),
           "Blocks that could be handed out now (polls, never waits).")
      .def_prop_ro("block_count", &TensorPool::block_count, Entry(), "Total blocks.")
      .def_prop_ro("block_bytes", &TensorPool::block_bytes, Entry(), "Bytes per block.")
      .def_prop_ro("reuse_count", &TensorPool::reuse_count, Entry(),
                   "Allocations that reused a block handed out before.")
      .def_prop_ro("device", &TensorPool::device, Entry(), "The DLDevice of the pool's tensors.");
}

}  // namespace holoscan::python
