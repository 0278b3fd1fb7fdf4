"""The connection runtime: what every protocol's connections run on, on the gateway and on workers.

- ``runtime``: one connection's structured concurrency (receive, emit and supervisor tasks in one
  TaskGroup), the one place errors become the protocol's error message and close code, work units.
- ``units``: named, replaceable units of work with asyncio's cancellation rules.
- ``relay``: frames between a client socket and a worker socket, with taps that see every frame.
- ``sockets``, ``inbox``, ``outbox``, ``taps``: the sockets both ends hold, and the queues between.
"""
