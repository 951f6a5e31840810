"""Running a candidate: the worker process and its protocol (framing, typed messages), the worker itself (one
module per mode), the evaluator's side of the conversation and its state, where a run is placed, the device and
compile gates, CPU cores."""
