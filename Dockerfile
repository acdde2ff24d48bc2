# syntax=docker/dockerfile:1.7
# The PyTorch wheels carry their own CUDA libraries; the base image supplies the runtime the
# NVIDIA container toolkit expects. Run with (see README): docker run --gpus all --stop-timeout 120
#   -p 127.0.0.1:7860:7860 -e XTTS_AUTH=user:password -v $PWD/models:/app/models -v $PWD/output:/app/output
#   -v $PWD/data:/data IMAGE
# Inside the container the app binds 0.0.0.0 (so the port can be published), which needs XTTS_AUTH, or
# XTTS_INSECURE_OPEN=1 when the port is published on 127.0.0.1 only.
FROM nvidia/cuda:13.0.1-runtime-ubuntu24.04

ENV DEBIAN_FRONTEND=noninteractive \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/venv/bin:$PATH

# System packages first: they change least. FFmpeg's libraries are what torchcodec decodes audio with.
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv ffmpeg \
    && rm -rf /var/lib/apt/lists/*

RUN python3 -m venv /opt/venv
WORKDIR /app

# Requirements before the code, so code changes reuse the (large) dependency layer.
COPY requirements.txt requirements-nodeps.txt ./
RUN --mount=type=cache,target=/root/.cache/pip pip install -r requirements.txt \
    && pip install --no-deps -r requirements-nodeps.txt \
    && python -c "import bitsandbytes, peft"  # 8-bit AdamW and LoRA are in the image, not a silent fallback

COPY . .
RUN mkdir -p /data
VOLUME ["/app/models", "/app/output", "/data"]
EXPOSE 7860
CMD ["python", "app.py", "--host", "0.0.0.0", "--data-dir", "/data"]
