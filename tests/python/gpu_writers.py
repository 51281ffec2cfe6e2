"""Slow GPU producers for the cross-process tests (ipc, ucx): each writes `first + arange(rows)`
(int32) into a tensor after a spin on its own stream, so that a consumer not ordered after the
write sees stale data. Imported in the spawned peers, where torch or CuPy is loaded on first use."""

import holoscan_dlpack as hd

_SPIN_THEN_WRITE = r"""
extern "C" __global__ void spin_then_write(int* out, int n, int first, long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    out[i] = first + i;
  }
}
"""


class TorchWriter:
    """Writes `first + arange(rows)` after a spin, on a torch stream."""

    def __init__(self, rows, spin):
        import torch
        self.torch = torch
        self.rows = rows
        self.stream = torch.cuda.Stream()
        self.base = torch.arange(rows, dtype=torch.int32, device="cuda")
        self.spin = spin
        # Loads both kernels now: CUDA loads a kernel's module on its first launch, and that load
        # waits for the whole device, so the first write's spin would be over before its handoff.
        self.write(self.new(), 0, spin=1)
        torch.cuda.synchronize()

    def new(self):
        with self.torch.cuda.stream(self.stream):
            return self.torch.empty(self.rows, dtype=self.torch.int32, device="cuda")

    def write(self, target, first, spin=None):
        with self.torch.cuda.stream(self.stream):
            view = self.torch.from_dlpack(target) if isinstance(target, hd.Tensor) else target
            cycles = self.spin if spin is None else spin
            if cycles:
                self.torch.cuda._sleep(cycles)
            self.torch.add(self.base, first, out=view)

    def busy(self):
        return not self.stream.query()

    def current(self):
        """A with-block in which the writer's stream is torch's current stream."""
        return self.torch.cuda.stream(self.stream)


class CupyWriter:
    """Writes `first + arange(rows)` after a spin, with one kernel on a CuPy stream."""

    def __init__(self, rows, spin):
        import cupy
        self.cupy = cupy
        self.rows = rows
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self.kernel = cupy.RawKernel(_SPIN_THEN_WRITE, "spin_then_write")
        self.spin = spin
        self.write(cupy.zeros(rows, dtype=cupy.int32), 0, spin=0)  # loads the kernel now
        cupy.cuda.Device().synchronize()

    def new(self):
        with self.stream:
            return self.cupy.empty(self.rows, dtype=self.cupy.int32)

    def write(self, target, first, spin=None):
        import numpy
        with self.stream:
            view = self.cupy.from_dlpack(target) if isinstance(target, hd.Tensor) else target
            cycles = self.spin if spin is None else spin
            self.kernel(((self.rows + 255) // 256,), (256,),
                        (view, numpy.int32(self.rows), numpy.int32(first), numpy.int64(cycles)))

    def busy(self):
        return not self.stream.done

    def current(self):
        """A with-block in which the writer's stream is CuPy's current stream."""
        return self.stream
