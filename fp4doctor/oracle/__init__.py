"""Ask the engine: the installed engine's own selection code as ground truth.

fp4doctor's rules predict, from source read release by release, which NVFP4 kernel an engine
picks. When the engine judged is installed, an isolated worker process (`oracle.worker`, run by
the engine's interpreter) imports the engine's own selection functions and asks them, for the
compute capability judged, the knobs as set and as `fp4doctor env` would set them, which kernel
each FP4 GEMM family gets, or what the engine raises. The main process never imports torch or
the engine.

    asking = query.start(question, statics)               # parent: a worker in the background
    answers = asking.answers()                            # after the live GEMMs
    resolution = fold.fold(answers, evaluation, resolution)   # findings; the engine decides

One adapter module per engine and release range (`vllm_0_18`, `vllm_0_24`); `ADAPTERS` says
which module asks which releases. Submodules are imported where they are needed: the worker
imports no rules, the parent no engine.
"""
