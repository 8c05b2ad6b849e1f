"""OpenTelemetry spans of a run, live and exported: one concept, one folder.

* ``tracer``: the tracer agentlog uses (the user's TracerProvider), deterministic span ids,
  the selection and continuation event attributes;
* ``builder``: every span's attributes and events from records (one builder for the live
  path and for export, so a live span and its exported copy agree);
* ``live``: the run, tool, model-call and score spans while a run records;
* ``stream``: a stored trace streamed run by run into spans, in bounded memory;
* ``otlp_json``: the OTLP JSON encoding written by ``agentlog.export.to_otlp_json``.
"""
