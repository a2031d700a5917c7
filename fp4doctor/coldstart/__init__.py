"""Cold start: will the engine's first start-up compile FlashInfer kernels (JIT) or autotune the
FP4 GEMM, for the backend each family resolved to, on this GPU and engine release?

- `rules`: the rules, per release, cited (profiles/coldstart.yaml);
- `probe`: the JIT workspace, the prebuilt modules and the autotune cache on disk (torch-free);
- `verdict`: the judgement per family (`judge`), with the reported costs that match;
- `knobs`: `fp4doctor env --cold-start fast|persist`.

The package itself imports nothing: the probe needs only its own module.
"""
