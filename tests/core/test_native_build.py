"""The optional C kernels are built wherever a C compiler is (a silent fallback would hide
a broken build behind slower numpy passes; see agentlog._noise and agentlog._scrub)."""

from __future__ import annotations

import shlex
import shutil
import sysconfig

from agentlog import _noise, _scrub
from agentlog.adapters import _recording


def test_the_kernel_is_built_where_a_c_compiler_is() -> None:
    compiler = shlex.split(sysconfig.get_config_var("CC") or "cc")[0]
    if shutil.which(compiler) is None:  # pragma: no cover - every machine of this project has one
        assert not _noise.NATIVE and _scrub._unknown_key_names is None
        assert _recording._dump_set_fields is None
        return
    assert _noise.NATIVE, (
        f"a C compiler ({compiler}) is on PATH but agentlog._native was not built: reinstall "
        "with `pip install -e .` and read the build log")
    assert _scrub._unknown_key_names is not None, (
        f"a C compiler ({compiler}) is on PATH but agentlog._native_scrub was not built: "
        "reinstall with `pip install -e .` and read the build log")
    assert _recording._dump_set_fields is not None, (
        f"a C compiler ({compiler}) is on PATH but agentlog.adapters._fast_dump was not "
        "built: reinstall with `pip install -e .` and read the build log")
