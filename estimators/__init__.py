"""Estimators over recorded traces: CESS, ASV, bounds and certificates, reliability.

Not implemented yet (see the project's issues). Importing this package stays cheap:
scipy and POT are imported only inside the functions that need them.
"""

__all__: list[str] = []
