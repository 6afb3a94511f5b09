"""Speed benchmarks of the course, run by ``make bench`` (``python -m benchmarks.run``); results in README.md."""
