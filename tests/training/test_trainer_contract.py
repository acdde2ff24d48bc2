"""The trainer's contract holds (utils.training.loop.contract): its collaborators come in at construction, nothing
is assigned to a trainer after it is built, and no collaborator is looked up by a string.

Every product file (utils/, webui/, app.py) is parsed with `ast`. A violation is:
- an assignment (or `setattr`, or a `del`) to an attribute of something named `trainer` (`trainer.x = ...`,
  `self.setup.trainer.x = ...`, `trainer.micro_batching.micro = ...`), or a change to a trainer's callback lists
  (`trainer.callbacks....append(...)`): a trainer sets its own attributes as `self.x`, in its own methods;
- `getattr`/`hasattr` with a literal name on a trainer or on a collaborator (`parts`, `scoring`, `choose_best`,
  `ranks`, `out_of_memory_handler`), or on `self` inside the trainer's own classes.
The second test plants each kind of violation and shows the check finding it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COLLABORATORS = {"parts", "scoring", "choose_best", "ranks", "out_of_memory_handler"}
TRAINER_CLASSES = {"FineTuneTrainer", "OutOfMemoryRecovery"}
LIST_CHANGES = {"append", "insert", "extend", "remove", "clear", "pop"}


def _names(node: ast.AST) -> list[str]:
    """The names along an attribute chain, base first: `self.setup.trainer.x` -> [self, setup, trainer, x]."""
    names: list[str] = []
    while True:
        if isinstance(node, ast.Attribute):
            names.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Subscript | ast.Call):
            node = node.value if isinstance(node, ast.Subscript) else node.func
        elif isinstance(node, ast.Name):
            names.append(node.id)
            return names[::-1]
        else:
            return names[::-1]


def _is_trainer(name: str) -> bool:
    return name == "trainer" or name.endswith("_trainer")


class ContractCheck(ast.NodeVisitor):
    def __init__(self, where: str) -> None:
        self.where = where
        self.found: list[str] = []
        self.classes: list[str] = []

    def _say(self, node: ast.AST, what: str) -> None:
        self.found.append(f"{self.where}:{node.lineno}: {what}")

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.classes.append(node.name)
        self.generic_visit(node)
        self.classes.pop()

    def _check_target(self, target: ast.AST) -> None:
        if isinstance(target, ast.Tuple | ast.List):
            for element in target.elts:
                self._check_target(element)
            return
        if isinstance(target, ast.Attribute | ast.Subscript):
            owner = _names(target.value)
            if any(_is_trainer(name) for name in owner):
                self._say(target, f"assigns {ast.unparse(target)} on a built trainer")

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._check_target(target)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._check_target(node.target)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._check_target(node.target)
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            self._check_target(target)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name) and func.id in ("getattr", "hasattr", "setattr", "delattr") and node.args:
            owner = _names(node.args[0])
            literal = (
                len(node.args) > 1 and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)
            )
            own_self = owner == ["self"] and bool(TRAINER_CLASSES & set(self.classes))
            on_trainer = any(_is_trainer(n) for n in owner) or own_self
            if func.id in ("setattr", "delattr") and on_trainer:
                self._say(node, f"{func.id} on a built trainer: {ast.unparse(node)}")
            elif literal and (on_trainer or COLLABORATORS & set(owner)):
                self._say(node, f"looks up a collaborator by a string: {ast.unparse(node)}")
        if isinstance(func, ast.Attribute) and func.attr in LIST_CHANGES:
            owner = _names(func.value)
            if "callbacks" in owner and any(_is_trainer(n) for n in owner):
                self._say(node, f"changes a built trainer's callbacks: {ast.unparse(node)}")
        self.generic_visit(node)


def violations(source: str, where: str) -> list[str]:
    check = ContractCheck(where)
    check.visit(ast.parse(source, filename=where))
    return check.found


def product_files() -> list[Path]:
    files = [ROOT / "app.py"]
    for folder in ("utils", "webui"):
        files += sorted((ROOT / folder).rglob("*.py"))
    return files


def test_no_trainer_is_changed_after_it_is_built_and_no_collaborator_is_found_by_name():
    found = []
    for path in product_files():
        found += violations(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    assert not found, "the trainer's contract (utils/training/loop/contract.py) is broken:\n" + "\n".join(found)


PLANTED = {
    "trainer.choose_best = choice": "assigns trainer.choose_best",
    "self.setup.trainer.phase_times = times": "assigns self.setup.trainer.phase_times",
    "trainer.micro_batching.micro = 2": "assigns trainer.micro_batching.micro",
    "trainer.dashboard_logger.extra = f": "assigns trainer.dashboard_logger.extra",
    "trainer.model, trainer.optimizer = None, None": "assigns trainer.model",
    "setup.trainer.callbacks.callbacks_on_train_step_end.append(f)": "changes a built trainer's callbacks",
    "setattr(trainer, 'should_stop', f)": "setattr on a built trainer",
    "wait = getattr(self.choose_best, 'wait', None)": "looks up a collaborator by a string",
    "x = getattr(trainer, 'phase_times', None)": "looks up a collaborator by a string",
    "x = hasattr(self.parts.scoring, 'collect')": "looks up a collaborator by a string",
    "class FineTuneTrainer:\n    def f(self):\n        return getattr(self, 'scaler', None)": "by a string",
}


@pytest.mark.parametrize("source", list(PLANTED))
def test_the_check_finds_each_kind_of_planted_violation(source):
    found = violations(source, "planted.py")
    assert len(found) >= 1 and PLANTED[source] in found[0], found


def test_what_the_contract_allows_is_not_flagged():
    allowed = (
        "self.trainer = trainer\n"  # a collaborator keeping the trainer it works for
        "class FineTuneTrainer:\n    def f(self):\n        self.outcome = 1\n        self.grad_accum_steps = 2\n"
        "batches = getattr(loader, 'batch_sampler', None)\n"  # a torch DataLoader's, not a collaborator
        "trainer = build(parts)\n"
    )
    assert violations(allowed, "allowed.py") == []
