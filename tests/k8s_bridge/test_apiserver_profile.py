"""The benchmark's reader of kube-apiserver's Go CPU profiles
(``benchmarks/apiserver_profile.py``), on profiles encoded here by hand; the e2e suite
reads a real one (``tests/e2e/test_k8s_e2e_benchmark.py``)."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from benchmarks.apiserver_profile import Profile, by_request, kind_of, main, read


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, value: int | bytes) -> bytes:
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    return _varint(number << 3 | 2) + _varint(len(value)) + value


def _packed(values: list[int]) -> bytes:
    return b"".join(_varint(v) for v in values)


def _profile(stacks: list[tuple[list[str], int]], *, packed: bool = True) -> bytes:
    """A profile.proto message: one function and location per distinct name; each
    sample (count, cpu ns) on the stack of names given leaf first."""
    strings = ["", "samples", "count", "cpu", "nanoseconds"]
    ids: dict[str, int] = {}
    body = b""
    for names, _ in stacks:
        for name in names:
            if name not in ids:
                ids[name] = len(ids) + 1
                strings.append(name)
    for names, ns in stacks:
        locations = [ids[n] for n in names]
        if packed:
            sample = _field(1, _packed(locations)) + _field(2, _packed([1, ns]))
        else:  # the unpacked encoding of the same repeated fields
            sample = b"".join(_field(1, x) for x in locations) + _field(2, 1) + _field(2, ns)
        body += _field(2, sample)
    for name, i in ids.items():
        body += _field(4, _field(1, i) + _field(4, _field(1, i)))  # location -> line
        body += _field(5, _field(1, i) + _field(2, strings.index(name)))  # function
    for s in strings:
        body += _field(6, s.encode())
    return body


LIST = "k8s.io/apiserver/pkg/endpoints/handlers.ListResource.func1"
FILTERS = "k8s.io/apiserver/pkg/endpoints/filters.withAuthentication.func1"
GC = "runtime.gcBgMarkWorker"


@pytest.mark.parametrize("packed", [True, False])
def test_reads_samples_with_their_stacks_and_cpu_time(tmp_path: Path, packed: bool) -> None:
    path = tmp_path / "p.pb.gz"
    path.write_bytes(gzip.compress(_profile(
        [(["runtime.mallocgc", LIST, FILTERS], 10_000_000), ([GC], 20_000_000),
         (["main.other"], 5_000_000)], packed=packed)))
    profile = read(path)
    assert profile.samples == (
        (("runtime.mallocgc", LIST, FILTERS), 10_000_000), ((GC,), 20_000_000),
        (("main.other",), 5_000_000))
    assert profile.total_ns == 35_000_000


def test_kinds_are_the_first_match_and_shares_are_ms_per_pod(tmp_path: Path) -> None:
    # a LIST's stack also holds the request filters: the handler names the kind
    assert kind_of(["runtime.mallocgc", LIST, FILTERS]) == "LIST"
    assert kind_of([FILTERS]) == "request filters"
    assert kind_of(["main.other"]) == "other"
    a = Profile(((("x", LIST, FILTERS), 10_000_000), ((GC,), 20_000_000)))
    b = Profile(((("main.other",), 10_000_000),))
    # two rounds of 10 pods: 40 ms in all over 20 pods
    assert by_request([a, b], 10) == {"total": 2.0, "garbage collector": 1.0,
                                      "LIST": 0.5, "other": 0.5}
    with pytest.raises(ValueError, match="pods"):
        by_request([a], 0)
    with pytest.raises(ValueError, match="pods"):
        by_request([], 10)


def test_the_command_prints_the_table_or_one_error_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "p.pb"  # not gzipped: read as it is
    path.write_bytes(_profile([([LIST], 30_000_000)]))
    assert main(["3", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["total", "10.00", "ms", "per", "pod"]
    assert out[1].split() == ["LIST", "10.00", "ms", "per", "pod"]
    assert main(["0", str(path)]) == 2
    assert main([str(path)]) == 2
    assert capsys.readouterr().err.startswith("Error: usage:")
    bad = tmp_path / "bad.pb"
    bad.write_bytes(b"\x0f\xff")  # wire type 7: not a protobuf message
    assert main(["1", str(bad)]) == 1
    assert main(["1", str(tmp_path / "missing.pb")]) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and all(line.startswith("Error: cannot read") for line in err)
