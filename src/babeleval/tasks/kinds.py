"""Task kind -> the object that turns a variant's documents into requests and scores the
answers: one table, read by the runner (evaluate.py) and nothing else."""
from __future__ import annotations

from .bitext import Bitext
from .config import Variant
from .generation import Generation
from .knn import NearestNeighbourClassification
from .multiple_choice import MultipleChoice, MultipleChoiceByGeneration

KINDS = {"multiple_choice": MultipleChoice, "generation": Generation, "bitext": Bitext,
         "knn": NearestNeighbourClassification}


def kind_for(variant: Variant):
    """A multiple-choice variant with `scoring: generate` answers by generation (matched to a label)."""
    if variant.kind == "multiple_choice" and variant.scoring == "generate":
        return MultipleChoiceByGeneration(variant)
    return KINDS[variant.kind](variant)
