"""A scored sweep over train_gpt's settings (Optuna), the runs of an output folder side by side, and blind A/B
listening between two voices."""
