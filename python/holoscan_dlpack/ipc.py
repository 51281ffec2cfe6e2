"""Tensors across processes on one machine (the C++ ``holoscan::ipc``).

A :class:`Listener` (``Listener(path)``, ``Channel.connect(path)``) or ``Channel.pair()`` connects
two processes; an :class:`Exporter` publishes device tensors (a shareable ``TensorPool``'s, or
``cudaMalloc``'s) to its peers and holds each until its importer is done with it; an
:class:`Importer` receives them as read-only :class:`~holoscan_dlpack.Tensor` objects whose
readiness is the exporter's, waited for here before the tensor is returned (or, with
``readiness='gpu'``, ordered on the consumers' streams). Every blocking call waits without the GIL.

A :class:`Channel` passed to a :mod:`multiprocessing` child (a ``Process`` argument, or through a
``Queue`` or ``Pipe``) arrives there as a duplicate of its socket: close your own copy once the
child has started, so that either side sees the other hang up. See docs/python.md, "Across
processes".
"""

from multiprocessing import reduction as _reduction

from . import errors

from ._core.ipc import (
    Channel,
    Exporter,
    ExporterStats,
    Importer,
    ImporterStats,
    Listener,
    ReadinessWait,
)


def _rebuild_channel(duplicate):
    """The receiving side of a pickled Channel: adopts the descriptor that came."""
    return Channel.adopt(duplicate.detach())


def _reduce_channel(channel):
    """multiprocessing's pickling of a Channel: a duplicate of its socket for the receiver. A
    closed Channel has none: ClosedError, as every other use of it gives."""
    if channel.closed:
        raise errors.ClosedError("kClosed: ipc.Channel: closed (it cannot be sent to a process)")
    return _rebuild_channel, (_reduction.DupFd(channel.fileno()),)


# multiprocessing's pickler only (Process arguments, Queue, Pipe): a plain pickle of a Channel
# stays refused, since a descriptor means nothing outside a live handover between processes.
_reduction.register(Channel, _reduce_channel)

__all__ = ["Channel", "Exporter", "ExporterStats", "Importer", "ImporterStats", "Listener",
           "ReadinessWait"]
