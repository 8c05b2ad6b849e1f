"""Estimators over recorded traces (papers/000–004).

``from agentlog.estimators import cess``. Importing this package stays cheap: scipy and POT
are imported only inside the functions that need them.
"""

__all__ = ["cess"]
