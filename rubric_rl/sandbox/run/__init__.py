"""Running a candidate: the worker process, its protocol, the worker itself, device and compile gates."""
