#!/usr/bin/env python3
"""Counts the atomic read-modify-writes a run executed, per function: callgrind's per-instruction
counts (valgrind --tool=callgrind --dump-instr=yes --compress-pos=no --compress-strings=no)
joined with the objects' disassembly (lock-prefixed instructions and xchg with memory).

    valgrind --tool=callgrind --dump-instr=yes --compress-pos=no --compress-strings=no \\
        --separate-threads=yes --callgrind-out-file=cg.out \\
        build/default/benchmarks/holoscan_dlpack_zero_cost_benchmarks \\
        --benchmark_filter=Hop3_Zero --benchmark_min_time=0.2
    python3 benchmarks/callgrind_locks.py cg.out-01   # the benchmark's thread

Run it against the very binaries that were profiled: a rebuild moves the addresses. Divide a
function's count by the hops run (its calls of set_readiness_stream, say) for the
atomics per hop: each costs 13-16 ns on the H200's host against 4.8 ns on the build machine.
"""
import collections
import re
import subprocess
import sys


def executed(path):
    """(object, function, address) -> times executed, from an uncompressed callgrind file."""
    counts = collections.defaultdict(int)
    obj = function = None
    after_call = False
    for line in open(path):
        if line.startswith("ob="):
            obj = line[3:].strip()
        elif line.startswith("fn="):
            function = line[3:].strip()
        elif line.startswith("calls="):
            after_call = True  # the next cost line is the call's inclusive cost: not an instruction
        elif line.startswith("0x"):
            if after_call:
                after_call = False
                continue
            fields = line.split()
            counts[(obj, function, int(fields[0], 16))] += int(fields[-1])
    return counts


def atomic_addresses(obj):
    """Addresses of the lock-prefixed instructions (and xchg with memory) in `obj`."""
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", obj], capture_output=True,
                         text=True).stdout
    found = set()
    for line in out.splitlines():
        match = re.match(r"\s*([0-9a-f]+):\s+(.*)", line)
        if match and (match.group(2).startswith("lock") or
                      (match.group(2).startswith("xchg") and "(" in match.group(2))):
            found.add(int(match.group(1), 16))
    return found


def main():
    counts = executed(sys.argv[1])
    atomics = {obj: atomic_addresses(obj) for obj in {key[0] for key in counts}}
    per_function = collections.Counter()
    for (obj, function, address), times in counts.items():
        if address in atomics[obj]:
            per_function[function] += times
    print("atomic read-modify-writes executed:", sum(per_function.values()))
    for function, times in per_function.most_common(40):
        print(f"{times:12d}  {function[:150]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
