// Compiled with CUDA_API_PER_THREAD_DEFAULT_STREAM by a test that expects the library's sources to
// refuse that build: a null stream must mean the legacy default stream in them.
#include "cuda/cuda_api.hpp"
