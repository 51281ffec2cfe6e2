#pragma once
// The Python object that keeps a consumer's stream alive, where one can be found: a copy's export
// names the consumer's stream again when the consumer lets go, and a stream its framework has
// destroyed by then (CuPy destroys a Stream with its last reference) must not reach CUDA.
#include <Python.h>

#include <holoscan/cuda_handles.hpp>

namespace holoscan::python {

/**
 * @brief A new reference to the stream object that owns `handle`, or null when none is known:
 *        CuPy's current stream (what cupy.from_dlpack passes) when CuPy is loaded and its
 *        handle is `handle`. Imports nothing; never throws. An ordinary failure of the lookup is
 *        cleared (none known); an interruption or MemoryError stays raised, with null returned
 *        (clear_ordinary_error): the caller must check PyErr_Occurred(). Needs the GIL.
 */
PyObject* find_stream_owner(cudaStream_t handle) noexcept;

}  // namespace holoscan::python
