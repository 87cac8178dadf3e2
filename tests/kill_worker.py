"""`babeleval run ARGS...` in this process, killed with SIGKILL at one chosen moment (the
first argument), so a test can check what a kill leaves behind and that the same command
resumes from it:

  compile   as XLA starts compiling the first scoring call's program (empty cache)
  mid-line  while writing the samples file: after LINES complete records, half a line, then the kill
  results   while writing results.json: half the JSON in the temp file, then the kill
  none      not killed

Records are written CHUNK documents at a time (4 here, 256 in a real run), so a kill mid-task
leaves some chunks written and others not."""
import os
import signal
import sys
import threading

LINES = 6


def die():
    os.kill(os.getpid(), signal.SIGKILL)


def main(point: str, args: list[str]) -> None:
    import babeleval.evaluate as evaluate

    evaluate.CHUNK = 4
    if point == "compile":  # as XLA starts compiling the first scoring program (traced and lowered by then)
        import jax._src.compiler as compiler

        import babeleval.engine.scoring as scoring

        real, scoring_started = scoring.score_lines, threading.Event()

        def score_lines(*a, **k):
            scoring_started.set()
            return real(*a, **k)

        def backend_compile(*a, **k):
            if scoring_started.is_set():
                die()
            return real_compile(*a, **k)

        scoring.score_lines = score_lines
        real_compile, compiler.backend_compile_and_load = compiler.backend_compile_and_load, backend_compile
    elif point == "mid-line":
        import pathlib

        real_open = pathlib.Path.open

        class Sink:
            def __init__(self, handle):
                self.handle, self.lines = handle, 0

            def write(self, text):
                if self.lines == LINES:
                    self.handle.write(text[: len(text) // 2])
                    self.handle.flush()
                    die()
                self.lines += text.count("\n")
                return self.handle.write(text)

            def __getattr__(self, name):
                return getattr(self.handle, name)

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                return self.handle.__exit__(*exc)

        def open_(self, mode="r", *a, **k):
            handle = real_open(self, mode, *a, **k)
            return Sink(handle) if self.name.startswith("samples_") and "a" in mode else handle

        pathlib.Path.open = open_
    elif point == "results":
        import babeleval.results as results

        def dump(value, handle, **k):
            text = results.json.dumps(value, **k)
            handle.write(text[: len(text) // 2])
            handle.flush()
            os.fsync(handle.fileno())
            die()

        results.json = type("json", (), {"dump": staticmethod(dump), "dumps": staticmethod(results.json.dumps)})
    from babeleval.cli.main import cli

    cli(args)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
