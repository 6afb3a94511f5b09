"""Speed benchmarks of the course (pytest-benchmark), run by ``make bench``; the table is in README.md."""
