"""The ctypes mirror of the Level Zero headers must match what a C compiler sees.

One C program is generated from the Python definitions, compiled with gcc
against /usr/include/level_zero and run; it prints sizeof/alignof of every
struct, offset and size of every field, the value of every enumerator, every
array-size constant and the size of every function parameter. Function
pointers built from the binding's table are assigned to the real prototypes
with incompatible-pointer-type warnings turned into errors.
"""

from __future__ import annotations

import ctypes
import enum
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from l0mem._ze import enums, functions, scalars, structs

INCLUDE = Path("/usr/include/level_zero")
HEADERS = ("ze_api.h", "zes_api.h", "loader/ze_loader.h")

# C copies (from the 1.12 headers) of structs the installed 1.4 headers lack.
NEWER_STRUCT_C = {
    "ze_init_driver_type_desc_t": (
        "typedef struct { ze_structure_type_t stype; const void* pNext; uint32_t flags; }"
    ),
}


def _struct_classes() -> dict[str, type[structs.Struct]]:
    """Return every struct class the binding defines, by C name."""
    out = {}
    for name in structs.__all__:
        value = getattr(structs, name)
        if (
            isinstance(value, type)
            and issubclass(value, structs.Struct)
            and value is not structs.Struct
        ):
            out[name] = value
    return out


def _enum_classes() -> dict[str, type[enum.IntEnum]]:
    """Return every IntEnum class by its own (C enum typedef) name."""
    out = {}
    for name in enums.__all__:
        value = getattr(enums, name)
        if isinstance(value, type) and issubclass(value, enum.IntEnum) and value.__name__ == name:
            out[name] = value
    return out


STRUCTS = _struct_classes()
ENUMS = _enum_classes()
FLAG_ALIASES = sorted(
    n for n in enums.__all__ if n.endswith("_flags_t") and n not in enums.NEWER_THAN_HEADERS
)
SIZE_CONSTANTS = sorted(n for n in scalars.__all__ if n.isupper())
HANDLES = sorted(n for n in scalars.__all__ if n.endswith("_handle_t"))


def _c_name(name: str) -> str:
    """Return the C type name to measure for the Python struct ``name``."""
    return f"l0mem_{name}" if name in structs.NEWER_STRUCTS else name


def _header_text() -> str:
    """Return the concatenated text of the Level Zero headers."""
    return "\n".join((INCLUDE / h).read_text() for h in HEADERS)


def _strip_comments(text: str) -> str:
    """Return C ``text`` without // comments."""
    return re.sub(r"//[^\n]*", "", text)


def _header_structs(text: str) -> dict[str, list[str]]:
    """Return struct name -> field names in order, parsed from the headers."""
    out = {}
    for m in re.finditer(r"typedef\s+struct\s+_?\w+\s*\{(.*?)\}\s*(\w+)\s*;", text, re.S):
        fields = []
        for decl in _strip_comments(m.group(1)).split(";"):
            decl = " ".join(decl.split())
            if decl:
                fields.append(re.match(r".*?(\w+)\s*(\[\s*\w+\s*\])?$", decl).group(1))  # type: ignore[union-attr]
        out[m.group(2)] = fields
    return out


def _header_enums(text: str) -> dict[str, list[str]]:
    """Return enum typedef name -> enumerator names, parsed from the headers."""
    out = {}
    for m in re.finditer(r"typedef\s+enum\s+_?\w+\s*\{(.*?)\}\s*(\w+)\s*;", text, re.S):
        body = _strip_comments(m.group(1))
        out[m.group(2)] = re.findall(r"^\s*(Z\w+)\s*(?:=|,|$)", body, re.M)
    return out


def _includes() -> list[str]:
    """Return the #include lines every generated C file starts with."""
    return [
        "#include <stdio.h>",
        "#include <stddef.h>",
        "#include <stdint.h>",
        *(f"#include <level_zero/{h}>" for h in HEADERS),
    ]


def _signature_source() -> str:
    """Return C that assigns each real function to a pointer typed from the table."""
    lines = _includes()
    for name, restype, argtypes, _ in functions.FUNCTIONS:
        if name not in functions.NEWER_THAN_HEADERS:
            params = ", ".join(argtypes) or "void"
            lines.append(f"{restype} (*check_{name})({params}) = &{name};")
    return "\n".join(lines) + "\n"


def _c_source() -> str:
    """Return a C program printing every measurement the tests compare."""
    lines = _includes()
    for name, body in NEWER_STRUCT_C.items():
        lines.append(f"{body} l0mem_{name};")
    lines.append("int main(void) {")
    for name, cls in STRUCTS.items():
        c = _c_name(name)
        lines.append(f'printf("S {name} %zu %zu\\n", sizeof({c}), _Alignof({c}));')
        for field_name, *_ in cls._fields_:
            lines.append(
                f'printf("F {name}.{field_name} %zu %zu\\n", offsetof({c}, {field_name}), '
                f"sizeof((({c}*)0)->{field_name}));"
            )
    for enum_name, enum_cls in ENUMS.items():
        if enum_name not in enums.NEWER_THAN_HEADERS:
            lines.append(f'printf("Z {enum_name} %zu\\n", sizeof({enum_name}));')
        for member in enum_cls.__members__:
            if member not in enums.NEWER_THAN_HEADERS:
                lines.append(f'printf("E {member} %lld\\n", (long long){member});')
    for alias in FLAG_ALIASES:
        lines.append(f'printf("Z {alias} %zu\\n", sizeof({alias}));')
    for const in SIZE_CONSTANTS:
        lines.append(f'printf("D {const} %lld\\n", (long long){const});')
    for handle in [*HANDLES, "ze_bool_t"]:
        lines.append(f'printf("Z {handle} %zu\\n", sizeof({handle}));')
    for name, restype, argtypes, _ in functions.FUNCTIONS:
        if name in functions.NEWER_THAN_HEADERS:
            continue
        lines.append(f'printf("A {name}.ret %zu\\n", sizeof({restype}));')
        for i, arg in enumerate(argtypes):
            lines.append(f'printf("A {name}.{i} %zu\\n", sizeof({arg}));')
    lines += ["return 0;", "}"]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[int]]:
    """Compile and run the generated C program; return its measurements by key."""
    gcc = shutil.which("gcc")
    assert gcc, "gcc is required (bash .ci/dev setup installs it)"
    work = tmp_path_factory.mktemp("ze_layout")
    src = work / "layout.c"
    exe = work / "layout"
    src.write_text(_c_source())
    build = subprocess.run(
        [gcc, "-std=c11", "-Wall", "-o", str(exe), str(src)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert build.returncode == 0, f"layout program does not compile:\n{build.stderr[-4000:]}"
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60, check=True)
    out: dict[str, list[int]] = {}
    for line in run.stdout.splitlines():
        kind, key, *values = line.split()
        out[f"{kind} {key}"] = [int(v, 0) for v in values]
    return out


def test_generated_program_covers_the_whole_binding(measured: dict[str, list[int]]) -> None:
    """Every struct, field, enumerator and function shows up in the C output."""
    n_fields = sum(len(c._fields_) for c in STRUCTS.values())
    assert sum(k.startswith("S ") for k in measured) == len(STRUCTS) >= 45
    assert sum(k.startswith("F ") for k in measured) == n_fields
    checked = [n for n, *_ in functions.FUNCTIONS if n not in functions.NEWER_THAN_HEADERS]
    assert sum(k.startswith("A ") and k.endswith(".ret") for k in measured) == len(checked) >= 80


def test_function_table_matches_c_prototypes(tmp_path: Path) -> None:
    """Every row's argument list is exactly the C prototype's (count, types, const)."""
    src = tmp_path / "signatures.c"
    src.write_text(_signature_source())
    gcc = shutil.which("gcc")
    assert gcc, "gcc is required (bash .ci/dev setup installs it)"
    build = subprocess.run(
        [gcc, "-std=c11", "-fsyntax-only", "-Werror=incompatible-pointer-types",
         "-Werror=discarded-qualifiers", str(src)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    errors = [line for line in build.stderr.splitlines() if "error:" in line]
    assert build.returncode == 0, "table rows differ from the C prototypes:\n" + "\n".join(
        errors[:20]
    )


@pytest.mark.parametrize("name", sorted(STRUCTS))
def test_struct_layout_matches_c(name: str, measured: dict[str, list[int]]) -> None:
    """sizeof, alignof and every field's offset and size agree with C."""
    cls = STRUCTS[name]
    size, align = measured[f"S {name}"]
    problems = []
    if ctypes.sizeof(cls) != size:
        problems.append(f"sizeof: ctypes {ctypes.sizeof(cls)} != C {size}")
    if ctypes.alignment(cls) != align:
        problems.append(f"alignof: ctypes {ctypes.alignment(cls)} != C {align}")
    for field_name, *_ in cls._fields_:
        offset, fsize = measured[f"F {name}.{field_name}"]
        desc = getattr(cls, field_name)
        if desc.offset != offset or desc.size != fsize:
            problems.append(
                f"{field_name}: ctypes offset {desc.offset} size {desc.size} != C {offset} {fsize}"
            )
    assert not problems, f"{name} differs from C: " + "; ".join(problems)


@pytest.mark.parametrize("name", sorted(STRUCTS))
def test_struct_has_every_c_field_in_order(name: str) -> None:
    """The Python struct lists the same fields, in the same order, as the header."""
    if name in structs.NEWER_STRUCTS:
        assert name not in _header_structs(_header_text()), f"{name} is in the headers now"
        return
    c_fields = _header_structs(_header_text())[name]
    assert [f for f, *_ in STRUCTS[name]._fields_] == c_fields


@pytest.mark.parametrize("name", sorted(STRUCTS))
def test_struct_presets_its_stype(name: str) -> None:
    """A struct with stype gets the enumerator the header assigns to it."""
    cls = STRUCTS[name]
    has_stype = cls._fields_[0][0] == "stype"
    assert (cls._stype_ is not None) == has_stype
    if not has_stype:
        return
    if name in structs.NEWER_STRUCTS:
        assert cls().stype == cls._stype_ != 0
        return
    text = _header_text()
    block = re.search(
        r"typedef enum _(ze|zes)_structure_type_t\s*\{.*?::" + re.escape(name) + r"\b", text, re.S
    )
    assert block, f"no structure type documents {name}"
    expected = re.findall(r"(Z\w+)\s*=\s*\w+,\s*///<\s*::" + re.escape(name) + r"\b", text)[0]
    assert cls._stype_ == getattr(enums, expected)
    assert cls().stype == getattr(enums, expected)


@pytest.mark.parametrize("name", sorted(ENUMS))
def test_enum_values_match_c(name: str, measured: dict[str, list[int]]) -> None:
    """Every enumerator has its C value, and the enum is 4 bytes like in structs."""
    cls = ENUMS[name]
    wrong = {}
    for member, value in cls.__members__.items():
        if member in enums.NEWER_THAN_HEADERS:
            continue
        c_value = measured[f"E {member}"][0]
        if int(value) != c_value:
            wrong[member] = (int(value), c_value)
    assert not wrong, f"{name}: (python, C) values differ: {wrong}"
    if name not in enums.NEWER_THAN_HEADERS:
        assert measured[f"Z {name}"] == [4]


@pytest.mark.parametrize("name", sorted(ENUMS))
def test_enum_has_every_c_enumerator(name: str) -> None:
    """No enumerator of the header is missing from the Python enum."""
    c_enums = _header_enums(_header_text())
    if name in enums.NEWER_THAN_HEADERS:
        assert name not in c_enums, f"{name} is in the headers now"
        return
    assert set(c_enums[name]) <= set(ENUMS[name].__members__), set(c_enums[name]) - set(
        ENUMS[name].__members__
    )
    assert all(getattr(enums, m) == ENUMS[name][m] for m in ENUMS[name].__members__)


def test_newer_than_headers_names_really_are_absent() -> None:
    """Names exempted from the C comparison must not be in the installed headers."""
    text = _header_text()
    for name in [*enums.NEWER_THAN_HEADERS, *structs.NEWER_STRUCTS, *functions.NEWER_THAN_HEADERS]:
        assert not re.search(rf"\b{name}\b", text), f"{name} is in the headers: check it against C"


def test_flag_typedefs_and_handles_have_c_sizes(measured: dict[str, list[int]]) -> None:
    """Flag typedefs are uint32_t, handles pointer sized, ze_bool_t one byte."""
    for alias in FLAG_ALIASES:
        assert measured[f"Z {alias}"] == [4], alias
    for handle in HANDLES:
        assert measured[f"Z {handle}"] == [ctypes.sizeof(getattr(scalars, handle))], handle
    assert measured["Z ze_bool_t"] == [ctypes.sizeof(scalars.ze_bool_t)] == [1]


def test_array_size_constants_match_c(measured: dict[str, list[int]]) -> None:
    """ZE_MAX_DEVICE_NAME and friends have the header's values."""
    for const in SIZE_CONSTANTS:
        assert measured[f"D {const}"] == [getattr(scalars, const)], const


@pytest.mark.parametrize("row", functions.FUNCTIONS, ids=[r[0] for r in functions.FUNCTIONS])
def test_function_parameters_have_c_sizes(
    row: functions.FunctionSpec, measured: dict[str, list[int]]
) -> None:
    """Each ctypes parameter type is as wide as the C parameter it stands for."""
    name, restype, argtypes, _ = row
    if name in functions.NEWER_THAN_HEADERS:
        for arg in argtypes:
            functions.ctype_of(arg)
        return
    assert measured[f"A {name}.ret"] == [ctypes.sizeof(functions.ctype_of(restype))]
    for i, arg in enumerate(argtypes):
        assert measured[f"A {name}.{i}"] == [ctypes.sizeof(functions.ctype_of(arg))], (i, arg)


def test_table_covers_every_function_once() -> None:
    """Each C function appears in exactly one row of the table."""
    names = [name for name, *_ in functions.FUNCTIONS]
    assert len(names) == len(set(names))


def test_embedded_structs_and_explicit_values() -> None:
    """Embedded structs get their stype too; explicit keyword values win; pNext starts NULL."""
    props = structs.zes_device_properties_t()
    assert props.stype == enums.ZES_STRUCTURE_TYPE_DEVICE_PROPERTIES
    assert props.core.stype == enums.ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES
    assert props.pNext is None and props.core.pNext is None
    newer = structs.ze_device_properties_t(stype=enums.ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES_1_2)
    assert newer.stype == enums.ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES_1_2
    desc = structs.ze_device_mem_alloc_desc_t(ordinal=3)
    assert (desc.stype, desc.ordinal) == (enums.ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC, 3)
