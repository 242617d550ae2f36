"""Pure logic shared by the Dagster definitions, the CLI, the tests and the benchmarks."""
