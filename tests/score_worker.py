"""Score the first XCOPA-sw questions and continue their premises greedily in a separate
process (its device count from XLA_FLAGS) with the model given; write the results as JSON.

  python score_worker.py OUT DATA MODEL"""
import json
import sys
from pathlib import Path


def main(out: str, data: str, model_spec: str) -> None:
    import jax

    from babeleval.engine.generate import Generator
    from babeleval.requests import Generate
    from babeleval.engine.scoring import Scorer
    from babeleval.loading import load_model
    from babeleval.evaluate import prepare_task
    from babeleval.tasks.files import find_task

    unit, = prepare_task(find_task("xcopa-sw"), Path(data), limit=12)
    questions = unit.items
    model = load_model(model_spec)
    scorer = Scorer(model)
    results = scorer.loglikelihood(unit.kind.requests(questions))
    generator = Generator(model)
    texts = generator.generate([Generate(q.context, ("\n",), 8) for q in questions[:5]])
    Path(out).write_text(json.dumps({"logprob": [r.logprob for r in results], "rows": scorer.stats.questions,
                                     "texts": texts, "generated": generator.stats.prompt_tokens > 0,
                                     "devices": jax.local_device_count()}))


if __name__ == "__main__":
    main(*sys.argv[1:4])
