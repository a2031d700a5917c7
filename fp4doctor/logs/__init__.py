"""Reading an engine's log as users have it: a file, stdin, `docker logs` or `kubectl logs`
output, a pasted traceback, a growing server log (`verify-log`, `verify-log --follow`).

- `source`: the bytes, line by line, with bounded memory (regular files only, caps);
- `lines`: one line's prefixes (timestamps, process and rank tags, ANSI codes) taken off;
- `failures`: the errors in it (exceptions, CUDA, NCCL, assertions), tracebacks per process,
  one finding per distinct cause with a count;
- `signatures`: the known errors' text (profiles/signatures.yaml), mapped to their cause;
- `layers`: vLLM's module tree and SGLang's arguments joined into one table per layer class.
"""
