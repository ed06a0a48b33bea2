"""Catching the figures a plot module saves, to inspect its artists (test support)."""

from __future__ import annotations

from typing import Any

import pytest


def capture(monkeypatch: pytest.MonkeyPatch, module: Any) -> list[Any]:
    """Keep every figure ``module`` saves (it is still written)."""
    figures: list[Any] = []
    save = module.save_figure

    def keep(fig: Any, fmt: str, path: Any) -> None:
        figures.append(fig)
        save(fig, fmt, path)

    monkeypatch.setattr(module, "save_figure", keep)
    return figures
