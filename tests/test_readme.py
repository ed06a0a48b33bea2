"""The README's Python examples run as written, against the simulated driver."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support import sim

README = Path(__file__).resolve().parent.parent / "README.md"


def _python_blocks() -> list[str]:
    """Return the README's fenced Python code blocks."""
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def _block_with(text: str) -> str:
    """Return the one README Python block containing ``text``."""
    (block,) = [b for b in _python_blocks() if text in b]
    return block


def test_readme_has_the_backend_and_the_core_example() -> None:
    assert len(_python_blocks()) == 2


@pytest.mark.parametrize(("peers", "route"), [("all", "direct"), ("none", "staged")])
def test_readme_backend_example_copies_between_the_devices_info_lists(
    peers: str, route: str
) -> None:
    block = _block_with("from l0mem.backends import open_backend")
    proc = sim.run_python(block, timeout=120, devices=2, peers=peers)
    assert proc.returncode == 0, proc.stderr
    # backend name, device 1's name, the route and why, then the bytes that arrived.
    assert proc.stdout.startswith(f"l0 l0mem simulated GPU 1 {route} "), proc.stdout
    assert proc.stdout.rstrip().endswith(" 5a5a5a5a"), proc.stdout


def test_readme_python_example_runs_and_makes_the_mirror() -> None:
    block = _block_with("ctx.make_resident(dev1, buf)")
    # The simulator in peer-resident mode mirrors on make_resident: the example's
    # comment is ground truth there, and the mirror is released with the buffer.
    probe = (
        "\nfrom tests.support.sim import SimControl\n"
        "ctl = SimControl.from_env()\n"
        "print('mirror-after', ctl.mirror_bytes())\n"
    )
    code = block.replace(
        "        ctx.make_resident(dev1, buf)",
        "        ctx.make_resident(dev1, buf)\n"
        "        from tests.support.sim import SimControl\n"
        "        print('mirror-during', SimControl.from_env().mirror_bytes())",
    )
    assert code != block
    proc = sim.run_python(code + probe, timeout=120, devices=2, mirror="peer-resident")
    assert proc.returncode == 0, proc.stderr
    assert f"mirror-during {1 << 30}" in proc.stdout
    assert "mirror-after 0" in proc.stdout
