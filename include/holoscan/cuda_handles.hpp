#pragma once
/**
 * @file
 * @brief CUDA handle types declared the way CUDA declares them, so that public headers need no
 *        CUDA header and consumers compile without the toolkit.
 */

/** @brief Opaque CUDA stream object (declared as in CUDA's driver_types.h). */
struct CUstream_st;
/** @brief Opaque CUDA event object (declared as in CUDA's driver_types.h). */
struct CUevent_st;

/** @brief A borrowed CUDA stream handle; identical to the CUDA runtime's own typedef. */
typedef CUstream_st* cudaStream_t;  // NOLINT(modernize-use-using): must match CUDA's typedef
/** @brief A CUDA event handle; identical to the CUDA runtime's own typedef. */
typedef CUevent_st* cudaEvent_t;  // NOLINT(modernize-use-using): must match CUDA's typedef
