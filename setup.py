"""Build configuration beyond pyproject.toml: the optional C kernels.

``agentlog._native`` computes the noise words (``agentlog._noise``),
``agentlog._native_scrub`` walks payload keys for the credential scrubber's prefilter
(``agentlog._scrub``), and ``agentlog.adapters._fast_dump`` reads an SDK response model's
JSON body (``agentlog.adapters._recording.dump_body``). ``optional=True``: without a C
compiler the install still succeeds and agentlog computes the same results in Python and
numpy (and pydantic), only slower.
"""

import sys

from setuptools import Extension, setup

# gumbel_argmax calls the C library's log: link libm where it is a library of its own.
_LIBM = [] if sys.platform == "win32" else ["m"]
# No fused multiply-add in _native's entropy sum (a compiler may contract p * log p + acc
# where the CPU has FMA, e.g. aarch64): select's span event and export must agree bit
# for bit. MSVC does not contract by default.
_NO_CONTRACT = [] if sys.platform == "win32" else ["-ffp-contract=off"]

setup(
    ext_modules=[
        Extension("agentlog._native", ["agentlog/_native.c"], optional=True,
                  extra_compile_args=["-O2", *_NO_CONTRACT], libraries=_LIBM),
        Extension("agentlog._native_scrub", ["agentlog/_native_scrub.c"], optional=True,
                  extra_compile_args=["-O2"]),
        Extension("agentlog.adapters._fast_dump", ["adapters/_fast_dump.c"], optional=True,
                  extra_compile_args=["-O2"]),
    ],
)
