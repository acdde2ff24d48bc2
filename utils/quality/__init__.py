"""Measured quality: intelligibility (CER/WER), speaker similarity, audio measures, best-checkpoint rules.

Importable from a notebook, each module documented where it is defined:

- `asr.get_transcriber` / `transcriber_or_reason`: one faster-whisper model per process.
- `intelligibility.cer` / `wer` / `corpus_cer`: error rates, normalised as ASR evaluations do.
- `speaker.speaker_embedding` / `embed_file` / `cosine`: Resemblyzer speaker similarity.
- `audio_measures.measure_file` / `flag_outliers`: loudness, clipping, SNR, edge silences.
- `scoring.score_clips` / `score_folder`: generated speech scored against its texts and the speaker's clips.
- `selection.BestRule` / `combined_score` / `EarlyStopping`: which evaluation is best, and when to stop.
- `transcript_check.check_transcripts`, `dataset_check.check_dataset`: a dataset checked before training (each
  clip decoded, measured and scored for naturalness in worker processes: `clip_check`, `naturalness_flags`).
- `reference_candidates.reference_pool` / `clean_clips`: the training clips that may become a voice's reference.
- `sentence_check.SentenceCheck`: a spoken sentence checked as it is spoken (best of N, utils.model.long_text).

During training, `utils.training.evaluation.quality_eval` and `utils.training.evaluation.best_checkpoint` use them at
each evaluation.
"""
