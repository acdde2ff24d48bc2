"""The Fine-tune tab's panel about the chosen base model's files: shown, and kept, while any is missing. It names
each missing file, the folder they go in and how to get them, in the page's words (a toast that vanished after a
few seconds, with the list on one line and the API's keywords, did not). With it, what keeps the tab's computed
texts true to the form: a memory plan made for other settings gives way to a note."""

from __future__ import annotations

from typing import Any

import gradio as gr

from utils.model.base_models import _MAIN_ONLY as MAIN_ONLY  # published on the hub's main branch only
from utils.model.base_models import HF_REPO, KNOWN_VERSIONS, TINY, check_version_name, missing_files, models_root
from webui import form
from webui.context import UIContext
from webui.shown import page_error, shown


def missing_weights(version: str) -> list[str]:
    """The base model files missing from the version's folder ([] for tiny, a complete folder, or a bad name)."""
    if not version or version == TINY:
        return []
    try:
        check_version_name(version)
    except ValueError:
        return []  # not a base model name: the form says so when Start checks it
    return missing_files(models_root() / version)


def missing_weights_markdown(version: str) -> str:
    """The panel: "" when nothing is missing; else each missing file, the folder and how to get them."""
    missing = missing_weights(version)
    if not missing:
        return ""
    folder = models_root() / version
    files = "\n".join(f"- `{shown(name, 'plain')}`" for name in missing)
    lines = [
        f"#### ⚠ Base model {shown(version)}: {len(missing)} of its files are not on this machine",
        f"They go in the folder **{shown(str(folder))}**:\n\n{files}",
    ]
    if version in KNOWN_VERSIONS:
        on_main = [name for name in missing if name in MAIN_ONLY]
        where = f"version **{shown(version)}**" + (
            f"; {', '.join(on_main)} from the main branch" if on_main and version != "main" else ""
        )
        lines.append(
            "**How to get them:** with an internet connection, press *Start training*: they are downloaded "
            f"first (about 2 GB). Offline, download them from https://huggingface.co/{HF_REPO} ({where}) on "
            "another machine and copy them into that folder. To try the studio without them, choose the base "
            f"model **{TINY}**."
        )
    else:
        lines.append(
            f"**How to get them:** copy them into that folder, or choose another base model (**{TINY}** works "
            "without any download)."
        )
    return "\n\n".join(lines)


def check_base_model(version: str) -> None:
    """Before anything is spawned: a base model whose files are missing and cannot be fetched now is a page error
    in a second, not a run that fails after loading everything else."""
    from utils.model.base_models import MissingBaseModelFiles, ensure_base_model, hub_unreachable

    if version == TINY:
        return
    try:
        ensure_base_model(version, download=False)
    except MissingBaseModelFiles as exc:
        why = hub_unreachable()
        if why:
            missing = missing_weights(version)
            raise page_error(
                f"Base model {version} is missing {len(missing)} file(s) ({', '.join(missing)}) and they cannot be "
                f"downloaded now ({why}). The panel under the form says where they go and how to get them."
            ) from exc


# Form fields that change no memory plan: editing them keeps the plan shown.
_NOT_PLANNED = ("train_csv", "eval_csv", "resume_from", "run_name", "seed", "save_step", "save_n_checkpoints")
STALE_PLAN = "*The settings changed since this plan: press **Estimate GPU memory** for theirs.*"


def wire_plan_freshness(ctx: UIContext, ui: dict[str, Any]) -> None:
    """What was computed for other settings does not stay: the missing-files panel follows the base model, and a
    memory plan made for another base model (or batch, precision...) gives way to a note."""
    f = ctx.form_component

    def panel(version: str) -> Any:
        text = missing_weights_markdown(version)
        return gr.update(value=text, visible=bool(text))

    hidden = {"api_visibility": "undocumented", "show_progress": "hidden"}
    f("version").change(panel, f("version"), ui["base_model_panel"], **hidden)
    for cid in form.form_ids():
        if cid not in _NOT_PLANNED:
            f(cid).change(lambda plan: STALE_PLAN if plan else "", ui["memory_plan"], ui["memory_plan"], **hidden)
