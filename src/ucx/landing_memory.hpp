#pragma once
// Receiver-owned memory for an arriving tensor: a block of the worker's receive pool, or a fresh
// host allocation that the received Tensor owns (writable, freed after every deallocation point).
#include <cstdint>
#include <memory>

#include <ucs/memory/memory_type.h>

#include "holoscan/expected.hpp"
#include "holoscan/tensor.hpp"
#include "holoscan/tensor_pool.hpp"
#include "holoscan/ucx/wire.hpp"

namespace holoscan::ucx::detail {

/**
 * @brief A compact tensor of `header`'s layout: from `pool` when given (its refusals as they are,
 *        "pool exhausted" among them), else host memory of at most `max_host_bytes` bytes
 *        (kResourceExhausted beyond, naming payload_bytes).
 */
expected<Tensor, Error> allocate_landing(const TensorHeader& header,
                                         const std::shared_ptr<TensorPool>& pool,
                                         std::uint64_t max_host_bytes);

/** @brief Whether allocate_landing's error means "no block free now; try again later". */
bool is_pool_exhausted(const Error& error, const std::shared_ptr<TensorPool>& pool) noexcept;

/** @brief The UCX memory type of a tensor's memory (host for pinned host memory). */
ucs_memory_type_t memory_type_of(const Tensor& tensor) noexcept;

}  // namespace holoscan::ucx::detail
