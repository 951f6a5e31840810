"""rubric-rl: train and evaluate LLM coders that write fast, correct CUDA for PyTorch programs."""

__version__ = "0.1.0"
