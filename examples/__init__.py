"""Runnable examples shipped with agentlog (installed as ``agentlog.examples``)."""
