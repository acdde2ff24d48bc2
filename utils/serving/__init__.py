"""An OpenAI-compatible speech server for finished runs (issue 36): `POST /v1/audio/speech`, `GET /v1/models`,
`GET /v1/audio/voices` (docs/serving.md).

catalog: the runs and voices served (names only, confined to the served folders); speech: the text made into what
the model is given and the one generation at a time; encoding: the response formats; auth: who may call; api: the
routes (Starlette); server: mounted in the web app (app.py) or standalone (`python -m utils.serving`), whose
options (options.py) load no model library.

May import: utils.model, utils.text, utils.data (sentences), utils.files, utils.training.recording (whether a run
trains); never webui (the web app hands its login and GPU lock in).
"""
