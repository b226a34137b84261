"""Data collection and replay on MCAP files (the original's data collection program and
readers, which read data from a file instead of live data: docs/design.md).

- :mod:`pluto.record.format`: how bus messages lie in an MCAP file (JSON with JSON Schemas, times, metadata).
- :mod:`pluto.record.writer`: :class:`~pluto.record.writer.LogWriter`, split logs, crash-safe chunks.
- :mod:`pluto.record.logfile`: :class:`~pluto.record.logfile.LogFile`, reading logs, including unclosed ones.
- :mod:`pluto.record.recorder`: the recorder behind ``pluto record``; :mod:`pluto.record.module` runs it as a module.
- :mod:`pluto.record.replay`: the replay behind ``pluto replay``, publishing the log's time as the ``Clock``.
- :mod:`pluto.record.readers`: ``SickReader("run.mcap")`` and the other sensors' readers, a proxy's API on a log.
- :mod:`pluto.record.carmen`: import of CARMEN logs; :mod:`pluto.record.export` (CSV), :mod:`pluto.record.plot`.

Nothing is imported here, so ``pluto.record.units`` stays cheap for the command line.
"""
