// Compiled by a test that expects it to fail: a Holoscan-style forward declaration before this
// library's headers is the first declaration, without the ABI tag, which the tagged definition
// may not add later. Forward-declare after including the headers (see forward_declarations.hpp).
namespace holoscan {
class Tensor;
}
#include <holoscan/tensor.hpp>
