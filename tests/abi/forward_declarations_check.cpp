// Compiled (syntax only) by another compiler than the build's: the forward declarations compile.
#include "forward_declarations.hpp"

int main() { return holoscan::Tensor() ? 1 : 0; }
