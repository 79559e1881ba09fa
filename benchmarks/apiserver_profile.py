"""Where kube-apiserver's CPU goes, from its own Go CPU profile (``/debug/pprof/profile``).

A Go CPU profile is a gzipped protocol buffer (``profile.proto`` of
github.com/google/pprof) whose samples carry their call stacks with the function
names already resolved, so no Go toolchain is needed to read one: :func:`read`
decodes the few messages used here (samples, locations, functions, strings) with
a reader of the protobuf wire format, and :func:`by_request` puts each sample under
the kind of work its stack shows (the API server's handler for a request, the
serving of a watch, the garbage collector, ...).  ``go tool pprof`` reads the same
files for anything finer.

::

    python -m benchmarks.apiserver_profile PODS FILE [FILE ...]

prints the CPU milliseconds per pod of each kind, over the files given (each the
profile of one round of ``PODS`` pods; see ``benchmarks.k8s_bind --apiserver-profile``).
"""

from __future__ import annotations

import gzip
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

#: The kinds of work, first match wins, each a fragment of a function name that is on
#: the stack of every sample of that kind (kube-apiserver v1.23's handlers and
#: runtime).  Requests are told apart by the handler that serves them; what runs in
#: the filters before a handler (authentication, authorization, priority and
#: fairness, routing, metrics) is "request filters".
KINDS: tuple[tuple[str, str], ...] = (
    ("POST pods/binding", "BindingREST"),
    ("watch serving", "WatchServer"),
    ("watch fan-out", "cacheWatcher"),
    ("LIST", "ListResource"),
    ("PATCH", "patchResource"),
    ("PUT", "UpdateResource"),
    ("GET", "GetResource"),
    ("DELETE", "deleteHandler"),
    ("POST (create)", "createHandler"),
    ("garbage collector", "gcBgMarkWorker"),
    ("etcd watch decoding", "watchChan"),
    ("etcd client", "go.etcd.io"),
    ("watch cache", "cacher"),
    ("TLS", "crypto/tls"),
    ("HTTP/2", "http2"),
    ("request filters", "withAuthentication"),
    ("net/http", "net/http"),
)


@dataclass(frozen=True)
class Profile:
    """A CPU profile: each sample's stack (leaf first) and its CPU nanoseconds."""

    samples: tuple[tuple[tuple[str, ...], int], ...]

    @property
    def total_ns(self) -> int:
        return sum(ns for _, ns in self.samples)


def _varint(data: bytes, i: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[i]
        i += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return result, i


def _fields(data: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) of one message; varints as ints, the
    length-delimited as bytes; fixed-width values as bytes."""
    i = 0
    while i < len(data):
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == 0:
            value, i = _varint(data, i)
        elif wire == 2:
            size, i = _varint(data, i)
            value = data[i:i + size]
            i += size
        elif wire == 1:
            value = data[i:i + 8]
            i += 8
        elif wire == 5:
            value = data[i:i + 4]
            i += 4
        else:
            raise ValueError(f"not a protobuf message: wire type {wire} at byte {i}")
        yield number, wire, value


def _ints(value: int | bytes) -> list[int]:
    """A repeated integer field's entries: one varint, or a packed run of them."""
    if isinstance(value, int):
        return [value]
    out, i = [], 0
    while i < len(value):
        n, i = _varint(value, i)
        out.append(n)
    return out


def read(path: Path) -> Profile:
    """Decode a (gzipped) Go CPU profile; the last sample value is CPU nanoseconds."""
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    strings: list[str] = []
    raw_samples: list[tuple[list[int], list[int]]] = []
    location_functions: dict[int, list[int]] = {}
    function_names: dict[int, int] = {}
    for number, _, value in _fields(data):
        if not isinstance(value, bytes):
            continue
        if number == 6:  # string_table
            strings.append(value.decode("utf-8", "replace"))
        elif number == 2:  # sample: location_id (1), value (2)
            locations: list[int] = []
            values: list[int] = []
            for n, _, v in _fields(value):
                if n == 1:
                    locations += _ints(v)
                elif n == 2:
                    values += _ints(v)
            raw_samples.append((locations, values))
        elif number == 4:  # location: id (1), line (4) -> function_id (1)
            lid, functions = 0, []
            for n, _, v in _fields(value):
                if n == 1 and isinstance(v, int):
                    lid = v
                elif n == 4 and isinstance(v, bytes):
                    functions += [int(f) for m, _, f in _fields(v)
                                  if m == 1 and isinstance(f, int)]
            location_functions[lid] = functions
        elif number == 5:  # function: id (1), name (2, a string index)
            fid, name = 0, 0
            for n, _, v in _fields(value):
                if n == 1 and isinstance(v, int):
                    fid = v
                elif n == 2 and isinstance(v, int):
                    name = v
            function_names[fid] = name
    samples = []
    for locations, values in raw_samples:
        stack = tuple(strings[function_names[f]] for loc in locations
                      for f in location_functions.get(loc, []))
        samples.append((stack, values[-1] if values else 0))
    return Profile(tuple(samples))


def kind_of(stack: Sequence[str]) -> str:
    """The kind of work (:data:`KINDS`) a sample's stack shows; "other" if none."""
    for kind, fragment in KINDS:
        if any(fragment in name for name in stack):
            return kind
    return "other"


def by_request(profiles: Sequence[Profile], pods: int) -> dict[str, float]:
    """CPU milliseconds per pod of each kind of work, over ``profiles`` (one round of
    ``pods`` pods each), largest first, with ``"total"`` first of all."""
    if pods <= 0 or not profiles:
        raise ValueError("pods: must be > 0, with at least one profile")
    counts: Counter[str] = Counter()
    for profile in profiles:
        for stack, ns in profile.samples:
            counts[kind_of(stack)] += ns
    scale = 1e6 * pods * len(profiles)
    out = {"total": sum(counts.values()) / scale}
    out.update((kind, ns / scale) for kind, ns in counts.most_common())
    return out


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 2 or not args[0].isdigit() or int(args[0]) <= 0:
        print("Error: usage: python -m benchmarks.apiserver_profile PODS FILE [FILE ...]",
              file=sys.stderr)
        return 2
    try:
        shares = by_request([read(Path(p)) for p in args[1:]], int(args[0]))
    except (OSError, ValueError, IndexError, KeyError) as exc:
        print(f"Error: cannot read the profiles: {exc}", file=sys.stderr)
        return 1
    for kind, ms in shares.items():
        print(f"{kind:22s} {ms:6.2f} ms per pod")
    return 0


if __name__ == "__main__":
    sys.exit(main())
