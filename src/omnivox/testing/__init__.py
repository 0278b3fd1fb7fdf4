"""What the benchmarks and the tests share: real server processes on loopback ports (``cluster``)
and a caller's speakerphone (``speakerphone``). Nothing the server runs imports this package (the
layer contract puts it above the gateway and the worker, below ``bench``)."""
