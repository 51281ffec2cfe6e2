// The README's first example: an operator's compute() in C++. tests/cpu/readme_examples_test.cpp
// runs it on the fake CUDA runtime. The README shows the part between the markers, verbatim:
// change both together (the test readme.examples_are_shown_verbatim checks it).
#include "readme/operator.hpp"

#include <utility>

#include <holoscan/dlpack.hpp>
#include <holoscan/tensor_pool.hpp>

// A tensor arrives from another framework over DLPack, its data written by work queued on
// `producer`. This operator reads it with its own kernel on `stream` and hands on the result,
// a tensor of its own pool.
// readme-begin
holoscan::expected<holoscan::Tensor, holoscan::Error> scale(DLManagedTensorVersioned* input,
                                                            cudaStream_t producer,
                                                            holoscan::TensorPool& pool,
                                                            cudaStream_t stream) {
  auto in = holoscan::make_tensor_from_dlpack_versioned(input);  // owns `input` from here on
  if (!in) {
    if (input != nullptr && input->deleter != nullptr) {
      input->deleter(input);  // refused, the message names the field: `input` is still ours
    }
    return holoscan::forward_error(std::move(in));
  }
  in->set_readiness_stream(producer);  // one event, recorded on the producer's stream now
  if (in->dtype().code != kDLFloat || in->dtype().bits != 32 || in->dtype().lanes != 1 ||
      !in->is_contiguous()) {  // the kernel reads compact float32: no views, no other types
    return holoscan::make_unexpected(holoscan::ErrorCode::kInvalidArgument,
                                     "scale: a compact float32 tensor only");
  }
  if (auto ready = in->synchronize_for_consumer_stream(stream); !ready) {  // one event wait
    return holoscan::forward_error(std::move(ready));
  }
  // A block of our pool, stream-ordered: `stream` also waits for its previous readers.
  auto out = pool.allocate(in->shape(), in->dtype(), stream);
  if (!out) {
    return out;
  }
  launch_scale(in->data_as<float>(), static_cast<float*>(out->data()), in->size(), stream);
  in->set_deallocation_stream(stream);  // the producer's deleter waits for this kernel
  out->set_readiness_stream(stream);    // and our consumers wait for it too
  return out;  // dropping `in` returns at once: its deleter runs on the library's release thread
}
// readme-end
