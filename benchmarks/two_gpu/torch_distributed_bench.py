"""The peer a PyTorch user picks to move tensors between processes: torch.distributed send/recv
over NCCL, one rank per GPU, measured the way the NCCL floor and the library's transport are.

    latency   one-way time of a 4 KiB message (ping-pong, half the round trip);
    bandwidth 1 MiB and 64 MiB messages streamed from rank 0 to rank 1;
    stream    10^4 tensors of 1 MiB, each written on rank 0's current stream and checked on rank 1
              (every element must hold its tensor's value), tensors/s.

Prints one JSON object per line (rank 0), like holoscan_dlpack_nccl_floor.

Usage: python torch_distributed_bench.py [--tensors N]   (needs two CUDA devices and NCCL)
"""

import argparse
import json
import os
import sys
import time

LATENCY_BYTES = 4 << 10
STREAM_BYTES = 1 << 20
STREAM_SLOTS = 4


def report(rank, **fields):
    if rank == 0:
        print(json.dumps({"peer": "torch.distributed", **fields}), flush=True)


def barrier(dist, torch, rank):
    # A one-element exchange each way, then a host wait: both ranks leave together.
    flag = torch.zeros(1, dtype=torch.uint8, device="cuda")
    if rank == 0:
        dist.send(flag, 1)
        dist.recv(flag, 1)
    else:
        dist.recv(flag, 0)
        dist.send(flag, 0)
    torch.cuda.synchronize()


def latency(dist, torch, rank):
    buffer = torch.zeros(LATENCY_BYTES, dtype=torch.uint8, device="cuda")
    peer = 1 - rank

    def ping_pong(count):
        for _ in range(count):
            if rank == 0:
                dist.send(buffer, peer)
                dist.recv(buffer, peer)
            else:
                dist.recv(buffer, peer)
                dist.send(buffer, peer)
        torch.cuda.synchronize()

    ping_pong(100)
    barrier(dist, torch, rank)
    iterations = 2000
    start = time.perf_counter()
    ping_pong(iterations)
    elapsed = time.perf_counter() - start
    report(rank, metric="latency_us", bytes=LATENCY_BYTES, value=elapsed / iterations / 2 * 1e6)


def bandwidth(dist, torch, rank, size):
    buffer = torch.zeros(size, dtype=torch.uint8, device="cuda")
    ack = torch.zeros(1, dtype=torch.uint8, device="cuda")
    count = 40 if size >= 64 << 20 else 400

    def stream(messages):
        for _ in range(messages):
            if rank == 0:
                dist.send(buffer, 1)
            else:
                dist.recv(buffer, 0)
        if rank == 0:
            dist.recv(ack, 1)
        else:
            dist.send(ack, 0)
        torch.cuda.synchronize()

    stream(4)
    barrier(dist, torch, rank)
    start = time.perf_counter()
    stream(count)
    elapsed = time.perf_counter() - start
    report(rank, metric="bandwidth_gbps", bytes=size, value=size * count / elapsed / 1e9)


def tensor_stream(dist, torch, rank, tensors):
    count = STREAM_BYTES // 4
    slots = [torch.empty(count, dtype=torch.int32, device="cuda") for _ in range(STREAM_SLOTS)]
    mismatches = torch.zeros(1, dtype=torch.int64, device="cuda")
    ack = torch.zeros(1, dtype=torch.uint8, device="cuda")
    barrier(dist, torch, rank)
    start = time.perf_counter()
    for i in range(tensors):
        slot = slots[i % STREAM_SLOTS]
        if rank == 0:
            slot.fill_(i + 1)
            dist.send(slot, 1)
        else:
            dist.recv(slot, 0)
            mismatches += (slot != i + 1).sum()
    if rank == 0:
        dist.recv(ack, 1)
    else:
        dist.send(ack, 0)
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    if rank == 1 and int(mismatches.item()) != 0:
        print(f"torch.distributed: {int(mismatches.item())} mismatched elements", file=sys.stderr)
        sys.exit(3)
    report(rank, metric="stream_tensors_per_s", bytes=STREAM_BYTES, tensors=tensors,
           value=tensors / elapsed)


def run(rank, tensors, port):
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(rank)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("nccl", rank=rank, world_size=2, device_id=torch.device("cuda", rank))
    try:
        latency(dist, torch, rank)
        bandwidth(dist, torch, rank, 1 << 20)
        bandwidth(dist, torch, rank, 64 << 20)
        tensor_stream(dist, torch, rank, tensors)
    finally:
        dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tensors", type=int, default=10000)
    parser.add_argument("--port", type=int, default=29511)
    args = parser.parse_args()
    import torch

    if torch.cuda.device_count() < 2:
        print(f"torch.distributed: needs two CUDA devices, found {torch.cuda.device_count()}",
              file=sys.stderr)
        return 77
    import torch.multiprocessing as mp

    # A rank that fails raises here (ProcessRaisedException / ProcessExitedException).
    mp.spawn(run, args=(args.tensors, args.port), nprocs=2, join=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
