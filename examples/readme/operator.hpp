#pragma once
// The README's C++ operator example (operator.cpp), with the kernel it launches, which the
// program that links it provides.
#include <cstdint>
#include <string>

#include <holoscan/dlpack.hpp>
#include <holoscan/tensor_pool.hpp>

/** @brief Queues out[i] = 2 * in[i] for `count` elements on `stream` (the program's kernel). */
void launch_scale(const float* in, float* out, std::int64_t count, cudaStream_t stream);

/** @brief The operator of the README: imports `input`, hands on 2 * input in a block of `pool`. */
holoscan::expected<holoscan::Tensor, holoscan::Error> scale(DLManagedTensorVersioned* input,
                                                            cudaStream_t producer,
                                                            holoscan::TensorPool& pool,
                                                            cudaStream_t stream);
