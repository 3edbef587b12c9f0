"""What the codes kernel mode's tests do on a CPU the kernel cannot run on (without AVX2 and FMA):
check the refusal a user gets there, then report the test xfailed. They must not skip: under CI=true every skip
but an opt-in one fails (conftest), and the refusal is the codes mode's whole behaviour on such a CPU, so it is
what they test.

`codes_kernel` (a marker, `pytestmark` in a module) routes a test through `kernel_or_refusal` before it runs.
"""

from __future__ import annotations

import pytest

from galahad.kernels import codes

REFUSAL = codes.REFUSAL


def assert_refused() -> None:
    """The kernel and the mode refuse in that one line: `codes.library()` (a RuntimeError) and the mode a model
    is loaded under (`get_mode("codes")`, a GalahadError, which the CLI prints as its one-line error)."""
    from galahad.flywheel.errors import GalahadError
    from galahad.kernels.modes import get_mode

    with pytest.raises(RuntimeError) as kernel:
        codes.library()
    assert str(kernel.value) == REFUSAL
    with pytest.raises(GalahadError) as mode:
        get_mode("codes")
    assert str(mode.value) == REFUSAL


def kernel_or_refusal() -> None:
    """Return where the kernel runs; elsewhere check the refusal and end the test as xfailed."""
    if codes.NEEDS <= codes.cpu.flags():
        return
    assert_refused()
    pytest.xfail(f"{REFUSAL}: the refusal was checked instead")
