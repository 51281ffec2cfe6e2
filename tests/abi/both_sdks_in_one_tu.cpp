// Compiled by a test that expects it to fail: Holoscan SDK's declarations (here the stand-in's)
// and this library's in one translation unit are a hard error, never a silent mix.
#include <holoscan/tensor.hpp>
#include "standin/holoscan_standin.hpp"
