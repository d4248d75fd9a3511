"""Running a graph: the spec, the meter, workers, gates, the runner and its progress."""
