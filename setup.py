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

setup(
    ext_modules=[
        Extension("agentlog._native", ["agentlog/_native.c"], optional=True,
                  extra_compile_args=["-O2"], libraries=_LIBM),
        Extension("agentlog._native_scrub", ["agentlog/_native_scrub.c"], optional=True,
                  extra_compile_args=["-O2"]),
        Extension("agentlog.adapters._fast_dump", ["adapters/_fast_dump.c"], optional=True,
                  extra_compile_args=["-O2"]),
    ],
)
