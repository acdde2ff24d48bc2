"""python -m utils.serving RUN_OR_OUTPUT_DIR... [--host 127.0.0.1] [--port 8000] [--api-key KEY]"""

from utils.serving.server import main

if __name__ == "__main__":
    main()
