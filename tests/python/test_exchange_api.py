"""Producers that publish DLPack 1.3's C exchange API (torch >= 2.10) are imported without any
Python call: the table's converter gives the tensor and its work stream becomes the readiness
point. A test producer type publishes such a table and counts what it is asked."""

import gc
import weakref

import pytest

import holoscan_dlpack as hd
from conftest import KDL_CPU, KDL_CUDA, cuda_device_present

np = pytest.importorskip("numpy")


@pytest.fixture
def exchange(testing):
    if not hasattr(testing.ExchangeProducer, "__dlpack_c_exchange_api__"):
        pytest.skip("built against a dlpack.h older than 1.3 (no C exchange API)")
    return testing


def test_import_uses_the_table_not_dunder_methods(exchange, collect):
    calls, queries = exchange.exchange_counts()
    deleted = exchange.deleter_calls()
    producer = exchange.ExchangeProducer([2, 3])
    w = weakref.ref(producer)
    t = hd.from_dlpack(producer)
    assert exchange.exchange_counts() == (calls + 1, queries), "a host tensor needs no stream"
    assert producer.dlpack_calls == 0
    assert t.shape == (2, 3) and t.device == (KDL_CPU, 0) and t.read_only
    del producer
    gc.collect()
    assert w() is not None, "the producer object lives as long as the import"
    assert exchange.deleter_calls() == deleted
    del t
    assert exchange.deleter_calls() == deleted + 1
    assert w() is None
    collect()
    assert exchange.deleter_calls() == deleted + 1


def test_copy_requests_go_through_dlpack(exchange):
    producer = exchange.ExchangeProducer([4])
    calls, _ = exchange.exchange_counts()
    hd.from_dlpack(producer, copy=True)
    assert producer.dlpack_calls == 1
    assert exchange.exchange_counts()[0] == calls


def test_rejected_tensor_is_freed_once_by_us(exchange, collect):
    deleted = exchange.deleter_calls()
    with pytest.raises(BufferError, match="shape"):
        hd.from_dlpack(exchange.ExchangeProducer([3, -1]))
    assert exchange.deleter_calls() == deleted + 1, "nobody else owns a rejected table import"
    collect()
    assert exchange.deleter_calls() == deleted + 1


@pytest.mark.parametrize("stream, queried", [(None, True), (1, True), (2, True), (-1, False)])
def test_device_import_asks_for_the_work_stream(exchange, stream, queried):
    exchange.set_work_stream(0)  # the legacy default stream
    _, queries = exchange.exchange_counts()
    t = hd.from_dlpack(exchange.ExchangeProducer([8], KDL_CUDA), stream=stream)
    assert exchange.exchange_counts()[1] == queries + queried
    assert t.device == (KDL_CUDA, 0)
    assert t.has_readiness_stream_contract() == (queried and cuda_device_present())
