"""Benchmarks: one module per workload of benchmarks/README.md.

Each module has ``main(quick=False, plot=False) -> list[dict]`` returning
rows ``{"workload", "case", "system", "time_s", "peak_bytes", "note"}``;
``tapestry bench`` prints them side by side and writes JSON/plots.
``plot`` is falsy, truthy (figures under benchmarks/results/, gitignored) or
``_harness.PUBLISH`` (also copied over the tracked docs/img/*.png); every
figure is written by ``_harness.save_figure``.
"""
