"""l0mem's JSON Schemas (l0mem/schemas) against the reports the commands write and their readers.

- every schema is a valid draft 2020-12 schema whose version is the one the code writes;
- a report of each command, made on the simulator, is valid under its schema held
  strictly (no field the schema does not name);
- what a reader refuses the schema refuses, for named malformed reports and for
  random mutations of real ones: anything the schema accepts, the reader reads.
"""

from __future__ import annotations

import copy
import json
import random
import sys
from collections.abc import Callable, Iterator
from typing import Any

import jsonschema
import pytest

from l0mem import schemas
from l0mem.audit.compare import COMPARE_SCHEMA
from l0mem.audit.matrix import MATRIX_SCHEMA, from_watch
from l0mem.audit.model import SCHEMA as AUDIT_SCHEMA
from l0mem.audit.model import AuditReport
from l0mem.bench.allreduce import SCHEMA as ALLREDUCE_SCHEMA
from l0mem.bench.copies import SCHEMA as P2P_SCHEMA
from l0mem.bench.kernels import SCHEMA as KERNELS_SCHEMA
from l0mem.cli.info import SCHEMA as INFO_SCHEMA
from l0mem.watch.export import SCHEMA as WATCH_SCHEMA
from tests.support import sim
from tests.support.cli import run_l0mem
from tests.support.own_memory import host_env
from tests.support.schemas import check_report, errors

WRITTEN = {
    "audit": AUDIT_SCHEMA,
    "watch": WATCH_SCHEMA,
    "compare": COMPARE_SCHEMA,
    "matrix": MATRIX_SCHEMA,
    "p2p": P2P_SCHEMA,
    "allreduce": ALLREDUCE_SCHEMA,
    "bench.kernels": KERNELS_SCHEMA,
    "info": INFO_SCHEMA,
}


def test_every_format_has_a_schema() -> None:
    assert set(schemas.NAMES) == set(WRITTEN)
    for name in schemas.NAMES:
        assert schemas.path(name).is_file(), name
    with pytest.raises(KeyError, match="no schema 'nope'"):
        schemas.load("nope")


@pytest.mark.parametrize("name", schemas.NAMES)
def test_each_schema_is_valid_and_names_the_version_written(name: str) -> None:
    schema = schemas.load(name)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    written = WRITTEN[name]
    version = written.split("/", 1)[1]
    assert schema["$id"] == f"urn:l0mem:schema:{name}:{version}"
    assert schema["title"].endswith(f"({written})")
    assert schemas.name_of({"schema": written}) == name
    # The version the code writes is one the schema accepts; another major is not.
    property_ = jsonschema.Draft202012Validator(schema["properties"]["schema"])
    assert property_.is_valid(written)
    major = int(version.split(".")[0])
    assert not property_.is_valid(written.replace(f"/{major}", f"/{major + 1}", 1))


def test_audit_and_watch_share_the_estimations_parts() -> None:
    audit, watch = schemas.load("audit")["$defs"], schemas.load("watch")["$defs"]
    for name in ("Sample", "AnalysisConfig", "SignalFit", "NextSteps", "SetupAnalysis", "Host"):
        # One definition: watch.schema.json holds copies of audit.schema.json's.
        assert watch[name] == audit[name], f"$defs/{name}: copy audit's into watch"


# ----------------------------------------------------------------- real reports


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Return one report of each command, made on the simulator (a few seconds in all)."""
    out = tmp_path_factory.mktemp("reports")
    two = sim.sim_env(devices=2)
    made: dict[str, dict[str, Any]] = {}

    def make(
        key: str, command: str, args: list[str], env: dict[str, str], codes: tuple[int, ...] = (0,)
    ) -> None:
        path = out / f"{key}.json"
        head, *sub = command.split()  # "bench kernels": the group, then its command
        proc = run_l0mem(head, [*sub, "--json", str(path), *args], env)
        assert proc.returncode in codes, proc.stderr
        made[key] = json.loads(path.read_text())

    audit = ["--size", "256MiB", "--steps", "4", "--settle", "0"]
    make(
        "audit",
        "audit",
        [*audit, "--setups", "l0,l0-peer-resident", "--remedies"],
        host_env(sim.sim_env(mirror="peer-resident")),
    )
    make("audit-skipped", "audit", ["--setups", "l0-multi"], sim.sim_env(devices=1), (3,))
    workload = [sys.executable, "-m", "l0mem", "p2p", "--sizes", "1MiB", "--reps", "1"]
    make("watch", "run", ["--trace", "--", *workload], sim.sim_env(mirror="peer-resident"))
    make("p2p", "p2p", ["--sizes", "4KiB,64KiB", "--reps", "2"], two)
    make("allreduce", "allreduce", ["--sizes", "4KiB", "--reps", "2"], two)
    kernels = ["--backend", "l0", "--elements", "4096", "--reps", "2", "--warmup", "0"]
    make("bench.kernels", "bench kernels", kernels, two)
    make("info", "info", [], sim.sim_env(devices=2, mirror="peer-resident"))
    audit_path, watch_path = str(out / "audit.json"), str(out / "watch.json")
    make("compare", "compare", [audit_path, audit_path], two)
    make("matrix", "matrix", [audit_path, watch_path], two)
    return made


@pytest.mark.parametrize(
    "key",
    [
        "audit",
        "audit-skipped",
        "watch",
        "p2p",
        "allreduce",
        "compare",
        "matrix",
        "bench.kernels",
        "info",
    ],
)
def test_real_reports_are_valid_under_their_schema_held_strictly(
    reports: dict[str, dict[str, Any]], key: str
) -> None:
    check_report(reports[key])


# ----------------------------------------------------------- schema and reader


def _changed(data: Any, path: tuple[Any, ...], value: Any) -> Any:
    """Return a copy of ``data`` with the item at ``path`` set to ``value`` (deleted for ...)."""
    data = copy.deepcopy(data)
    target = data
    for key in path[:-1]:
        target = target[key]
    if value is ...:
        target.pop(path[-1]) if isinstance(target, list) else target.pop(path[-1], None)
    else:
        target[path[-1]] = value
    return data


def _reads(reader: Callable[[Any], object], data: Any) -> bool:
    try:
        reader(data)
    except Exception:  # any refusal, a crash included: the schema must not have allowed it
        return False
    return True


def _read_watch(doc: Any) -> object:
    # As l0mem matrix takes a run/watch report (l0mem.cli.matrix._read).
    if not (
        str(doc.get("schema", "")).startswith("l0mem.watch/1.")
        and isinstance(doc.get("summary"), dict)
    ):
        raise ValueError("not a watch report")
    return from_watch(doc)


READERS: dict[str, Callable[[Any], object]] = {
    "audit": AuditReport.from_dict,
    "watch": _read_watch,
}

# (path, value, why the reader refuses): each must be refused by the schema too.
MALFORMED_AUDIT: list[tuple[tuple[Any, ...], Any]] = [
    (("runs",), ...),
    (("schema",), "l0mem.audit/2"),
    (("schema",), "l0mem.audit/x"),
    (("schema",), "something.else/1"),
    (("complete",), "yes"),
    (("created",), "yesterday"),
    (("created",), "2025-01-02T03:04:05+02:00"),
    (("fingerprint",), []),
    (("fingerprint", "simulated"), "yes"),
    (("fingerprint", "host", "kernel_release"), ""),
    (("analysis", "min_points"), 1),
    (("analysis", "confidence"), 1.0),
    (("analysis", "priority"), []),
    (("runs", 0, "status"), "great"),
    (("runs", 0, "backend"), "cuda"),
    (("runs", 0, "step_bytes"), -1),
    (("runs", 0, "target_bytes"), True),
    (("runs", 0, "env"), {"X": 1}),
    (("runs", 0, "samples", 1, "phase"), "warm"),
    (("runs", 0, "samples", 1, "t"), "0.1"),
    (("runs", 0, "samples", 1, "device_bytes"), ...),
    (("runs", 0, "samples", 1, "values"), {"proc.VmRSS": 1.5}),
    (("runs", 0, "samples", 1, "values"), {"": 1}),
    (("runs", 0, "samples", 1, "step"), 3),
    (("runs", 0, "result", "verdict"), "bad"),
    (("runs", 0, "result", "host", 0, "slope"), "1"),
    (("runs", 0, "result", "released"), "no"),
    (("runs", 0, "result", "next_steps"), {"text": "x"}),
]


@pytest.mark.parametrize(("path", "value"), MALFORMED_AUDIT)
def test_what_the_audit_reader_refuses_the_schema_refuses(
    reports: dict[str, dict[str, Any]], path: tuple[Any, ...], value: Any
) -> None:
    data = _small(reports["audit"])
    assert _reads(AuditReport.from_dict, data) and not errors(data, "audit")
    broken = _changed(data, path, value)
    if path[-1] == "step":  # a sample that is a window's edge must say which
        broken = _changed(broken, (*path[:-1], "edge"), ...)
    assert not _reads(AuditReport.from_dict, broken)
    assert errors(broken, "audit"), "the schema accepts what the reader refuses"


def test_a_skipped_or_failed_run_without_a_reason_is_refused_by_both(
    reports: dict[str, dict[str, Any]],
) -> None:
    broken = _changed(reports["audit-skipped"], ("runs", 0, "reason"), None)
    assert not _reads(AuditReport.from_dict, broken)
    assert errors(broken, "audit")


def _locations(data: Any, at: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Yield the path of every value inside ``data``."""
    items = (
        data.items()
        if isinstance(data, dict)
        else enumerate(data)
        if isinstance(data, list)
        else ()
    )
    for key, value in items:
        yield (*at, key)
        yield from _locations(value, (*at, key))


def _small(data: Any) -> Any:
    """Return ``data`` with long lists and objects cut to a few items (the mutations stay fast)."""
    if isinstance(data, dict):
        keep = list(data.items())
        if len(keep) > 40:  # a sample's values: every signal of the host
            keep = keep[:6]
        return {k: _small(v) for k, v in keep}
    if isinstance(data, list):
        return [_small(v) for v in data[:3]]
    return data


def _mutants(value: Any) -> list[Any]:
    """Return values to put in place of ``value``: other types, edges, the same number as a float."""
    out: list[Any] = [..., None, "", "?", -1, 0.5, True, [], {}]
    if isinstance(value, int) and not isinstance(value, bool):
        out.append(float(value))
    if isinstance(value, dict):
        out.append({**value, "l0mem_unknown": 1})
    if isinstance(value, list) and value:
        out.append(value + value[:1])
    return out


# Where the reader refuses what no JSON Schema can say (a rule across fields).
# The schema accepts these; docs/formats.md lists them.
ACROSS_FIELDS = {
    ("analysis", "clean_threshold"),  # must stay below mirror_threshold
    ("analysis", "mirror_threshold"),
    # (setup, remedy) once per report: a run repeated, or renamed as another
    ("runs",),
    ("runs", "setup"),
    ("runs", "remedy"),
}


@pytest.mark.parametrize("name", sorted(READERS))
def test_what_the_schema_accepts_the_reader_reads(
    reports: dict[str, dict[str, Any]], name: str
) -> None:
    data = _small(reports[name])
    reader = READERS[name]
    assert _reads(reader, data) and not errors(data, name)
    rng = random.Random(2205)
    both_refuse = 0
    for path in _locations(data):  # every value once, changed one way drawn at random
        target = data
        for key in path:
            target = target[key]
        value = rng.choice(_mutants(target))
        if value is ... and isinstance(path[-1], int):
            continue  # deleting from a list shifts it: a shorter list, still well formed
        mutant = _changed(data, path, value)
        schema_ok = not errors(mutant, name)
        reader_ok = _reads(reader, mutant)
        if schema_ok and not reader_ok:
            where = tuple(k for k in path if not isinstance(k, int))
            gap = name == "audit" and where in ACROSS_FIELDS
            assert gap, f"{name}: the schema accepts {path} = {value!r}; the reader refuses it"
        both_refuse += not schema_ok and not reader_ok
    assert both_refuse > 50  # the mutations reach what both check


# ------------------------------------------- bench kernels and info: held strictly


def _kernel_results() -> dict[str, dict[str, Any]]:
    """Return bench kernels reports of the other shapes: nothing timed, and interrupted."""
    from l0mem.bench.kernels import KernelBenchResult
    from l0mem.bench.timing import Measurement

    common: dict[str, Any] = {
        "backend": "l0",
        "device": "GPU 0",
        "elements": 1024,
        "repetitions": 4,
        "warmup": 1,
    }
    copy = Measurement((900, 1000), 8192, "host", note="no device timing")
    return {
        "no hardware": KernelBenchResult(
            **common, copy=None, kernels={}, no_hardware="NEO runs without hardware"
        ).to_dict(),
        "interrupted": KernelBenchResult(
            **common,
            copy=copy,
            kernels={"l0mem_f32_add": Measurement((1200,), 12288, "host")},
            complete=False,
        ).to_dict(),
    }


@pytest.mark.parametrize("shape", ["no hardware", "interrupted"])
def test_bench_kernels_reports_of_every_shape_are_valid(shape: str) -> None:
    check_report(_kernel_results()[shape])


def _other_type(value: Any) -> Any:
    """Return a value of a JSON type ``value``'s field does not admit (none admits two of these)."""
    if isinstance(value, bool):
        return "yes"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return 7
    if value is None:
        return []
    return [] if isinstance(value, dict) else {}


# Where any key or value is allowed: the driver environment, a caller's details.
FREE = {"environment", "details"}


@pytest.mark.parametrize("name", ["bench.kernels", "info"])
def test_a_wrong_type_or_a_missing_field_anywhere_fails_the_schema(
    reports: dict[str, dict[str, Any]], name: str
) -> None:
    data = reports[name]
    assert not errors(data, name)
    changed = 0
    for path in _locations(data):
        if FREE & {k for k in path[:-1] if isinstance(k, str)}:
            continue
        target = data
        for key in path:
            target = target[key]
        retyped = _changed(data, path, _other_type(target))
        assert errors(retyped, name), f"{name}: {path} as {_other_type(target)!r} passes"
        if not isinstance(path[-1], int):  # every key is required
            assert errors(_changed(data, path, ...), name), f"{name}: without {path} passes"
        changed += 1
    assert changed > 40


# (path, value): what no such report can hold, each refused by its schema.
MALFORMED = {
    "bench.kernels": [
        (("schema",), "l0mem.bench.kernels/2"),
        (("schema",), "l0mem.bench/1"),
        (("backend",), "cuda"),
        (("elements",), 0),
        (("timing",), "wall"),
        (("copy", "name"), "l0mem_f32_add"),
        (("copy", "samples_ns"), []),
        (("copy", "samples_ns", 0), -1),
        (("copy", "gbps"), -1.0),
        (("kernels", 0, "ratio_to_copy"), ...),
        (("kernels", 0, "min_ns"), 1.5),
    ],
    "info": [
        (("schema",), "l0mem.info/2"),
        (("loader", "init_path"), "zeInitEverything"),
        (("loader", "components", 0, "version"), "new"),
        (("drivers", 0, "version"), "1.2"),
        (("drivers", 0, "api_version"), "1"),
        (("drivers", 0, "driver_version"), 1 << 32),
        (("drivers", 0, "peer_access", 0, 0), "yes"),
        (("drivers", 0, "devices", 0, "vendor_id"), "8086"),
        (("drivers", 0, "devices", 0, "pci_address"), "10:00.0"),
        (("drivers", 0, "devices", 0, "uuid"), "not-a-uuid"),
        (("drivers", 0, "devices", 0, "memory_bytes"), -1),
        (("drivers", 0, "devices", 0, "type"), ""),
    ],
}


@pytest.mark.parametrize(
    ("name", "path", "value"), [(n, p, v) for n, cases in MALFORMED.items() for p, v in cases]
)
def test_named_malformed_bench_kernels_and_info_reports_fail(
    reports: dict[str, dict[str, Any]], name: str, path: tuple[Any, ...], value: Any
) -> None:
    assert not errors(reports[name], name)
    assert errors(_changed(reports[name], path, value), name)
