"""The README's Python example runs as written, against the simulated driver."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support import sim

README = Path(__file__).resolve().parent.parent / "README.md"


def _python_blocks() -> list[str]:
    """Return the README's fenced Python code blocks."""
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_python_example_runs_and_makes_the_mirror() -> None:
    (block,) = _python_blocks()
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
